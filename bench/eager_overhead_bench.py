"""Host cost of the neuron device against CPU PyTorch, measured in one run.

Each row runs the same work on CPU tensors and on neuron tensors (values computed by ATen on the
host, time by the simulated NeuronCore) and prints wall-clock time per iteration and the ratio.
The ratio is the price of simulation; the simulated device time is printed alongside.

    .venv/bin/python bench/eager_overhead_bench.py
"""

import time

import neuronsim
import torch


def bench(fn, iters):
    fn()  # warm up
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    if torch.neuron.is_initialized():
        torch.neuron.synchronize()
    return (time.perf_counter() - t0) / iters


def main():
    torch.manual_seed(0)
    cases = []

    def small_add(dev):
        x = torch.randn(64, 64, device=dev)
        return lambda: x + 1

    def mm(dev, n):
        a = torch.randn(n, n, device=dev)
        return lambda: a @ a

    def train_step(dev):
        model = torch.nn.Sequential(
            torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)
        ).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x = torch.randn(64, 256, device=dev)

        def step():
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()

        return step

    cases = [
        ("add 64x64", small_add, 2000),
        ("matmul 256", lambda d: mm(d, 256), 200),
        ("matmul 1024", lambda d: mm(d, 1024), 10),
        ("MLP train step", train_step, 30),
    ]
    print(f"{'case':<18}{'cpu ms':>10}{'neuron ms':>12}{'ratio':>8}{'sim us/iter':>14}")
    for name, make, iters in cases:
        cpu = bench(make("cpu"), iters)
        fn = make("neuron")
        t_sim0 = neuronsim.simulated_time_ns()
        dev = bench(fn, iters)
        sim_us = (neuronsim.simulated_time_ns() - t_sim0) / 1e3 / (iters + 1)
        print(f"{name:<18}{cpu * 1e3:>10.3f}{dev * 1e3:>12.3f}{dev / cpu:>8.1f}{sim_us:>14.2f}")


if __name__ == "__main__":
    main()
