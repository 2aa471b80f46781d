"""Host cost of the neuron device against CPU PyTorch, measured in one run.

Each row runs the same work on CPU tensors and on neuron tensors (values computed by ATen on the
host, time by the simulated NeuronCore) and prints wall-clock time per iteration and the ratio.
The ratio is the price of simulation; the simulated device time is printed alongside. Goals
(issue 6, fast mode): large ops within 1.3x of CPU eager; small ops within 4x per op.

    .venv/bin/python bench/eager_overhead_bench.py
"""

import time

import neuronsim
import torch


def bench(fn, iters, clock=time.perf_counter):
    fn()  # warm up
    t0 = clock()
    for _ in range(iters):
        fn()
    if torch.neuron.is_initialized():
        torch.neuron.synchronize()
    return (clock() - t0) / iters


def main():
    torch.manual_seed(0)
    cases = []

    def small_add(dev):
        x = torch.randn(64, 64, device=dev)
        return lambda: x + 1

    def mm(dev, n):
        a = torch.randn(n, n, device=dev)
        return lambda: a @ a

    def mlp(dev):
        return torch.nn.Sequential(
            torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)
        ).to(dev)

    def mlp_fwd_bwd(dev):
        model, x = mlp(dev), torch.randn(64, 256, device=dev)

        def step():
            model.zero_grad(set_to_none=True)
            model(x).square().mean().backward()

        return step

    def train_step(dev):
        model, x = mlp(dev), torch.randn(64, 256, device=dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def step():
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()

        return step

    def small_op_loop(dev):
        # 100 small elementwise ops back to back: the per-op dispatch and launch cost.
        x = torch.randn(32, 32, device=dev)

        def loop():
            y = x
            for _ in range(25):
                y = (y * 0.5 + 1.0).relu() - x
            return y

        return loop

    cases = [
        ("add 64x64", small_add, 2000),
        ("100 small ops", small_op_loop, 20),
        ("matmul 256", lambda d: mm(d, 256), 200),
        ("matmul 1024", lambda d: mm(d, 1024), 10),
        ("matmul 2048", lambda d: mm(d, 2048), 5),
        ("MLP fwd+bwd", mlp_fwd_bwd, 30),
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
    observer_cost([("add 64x64", small_add, 2000), ("100 small ops", small_op_loop, 20)])


def observer_cost(cases):
    """The op-tracking observer (a RecordFunction callback on every ATen op): the same loops with
    it removed and installed, interleaved, best of five, in this process's CPU time (the
    observer's own cost; wall-clock time on a shared machine mostly measures the neighbours)."""
    from neuronsim import _C

    print(f"\n{'op tracking':<18}{'off ms':>10}{'on ms':>12}{'ratio':>8}   (process CPU time)")
    was = _C._op_observer_enabled()
    for name, make, iters in cases:
        fn = make("neuron")
        best = {False: float("inf"), True: float("inf")}
        for _ in range(5):
            for on in (False, True):
                _C._set_op_observer(on)
                best[on] = min(best[on], bench(fn, iters, time.process_time))
        print(
            f"{name:<18}{best[False] * 1e3:>10.3f}{best[True] * 1e3:>12.3f}"
            f"{best[True] / best[False]:>8.3f}"
        )
    _C._set_op_observer(was)


if __name__ == "__main__":
    main()
