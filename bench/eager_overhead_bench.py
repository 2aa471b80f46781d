"""Host cost of the neuron device against CPU PyTorch, measured in one run.

Each row runs the same work on CPU tensors and on neuron tensors (values computed by ATen on the
host, time by the simulated NeuronCore) and prints wall-clock time per iteration and the ratio.
The ratio is the price of simulation; the simulated device time is printed alongside. Goals
(issue 13, fast mode): the loop of 100 small ops within 3x of CPU eager, add 64x64 within 2.5x,
large ops (matmul 1024, 2048) within 1.3x.

    .venv/bin/python bench/eager_overhead_bench.py

With NEURONSIM_HOST_PROFILE=1 it also prints where the neuron side's host time goes, per
iteration and stage (sim/host_profile.h): the stages inside the backend, and "outside" (Python,
the PyTorch dispatcher, autograd and the allocator) as the rest of the wall time.

    NEURONSIM_HOST_PROFILE=1 .venv/bin/python bench/eager_overhead_bench.py

On a shared machine a single timed loop mostly measures the neighbours: each case runs
--repeats (default 5) timed loops per side, CPU and neuron alternating, and the ratio is that of
the best (lowest) wall time of each side; the stage breakdown is the neuron side's best loop.
The "cpu-time ratio" column is the same comparison in this process's CPU time.

Last, two tables of the per-op cost of what watches the ops: the op-tracking observer (off and
on) and a whole-program trace (neuronsim.tracing, recording every op, launch and instruction to a
Chrome JSON file: without and with one recording, the recording's final write included).
"""

import argparse
import time

import neuronsim
import torch


def bench(fn, iters, clock=time.perf_counter):
    fn()  # warm up
    neuronsim._C._host_profile_reset()  # the stage breakdown covers the timed iterations
    t0 = clock()
    for _ in range(iters):
        fn()
    if torch.neuron.is_initialized():
        torch.neuron.synchronize()
    return (clock() - t0) / iters


def best_of(make, iters, repeats):
    """CPU and neuron timed loops alternating; the best wall (and process CPU) time of each
    side, the neuron side's stage totals and simulated us per iteration of its best loop."""
    cpu_fn, dev_fn = make("cpu"), make("neuron")
    best = {"cpu": (float("inf"), float("inf")), "neuron": (float("inf"), float("inf"))}
    stages, sim_us = None, 0.0
    hits0, misses0, _ = neuronsim._C._program_cache_stats()
    for _ in range(repeats):
        for side, fn in (("cpu", cpu_fn), ("neuron", dev_fn)):
            t_sim0 = neuronsim.simulated_time_ns()
            c0 = time.process_time()
            wall = bench(fn, iters)
            cpu = (time.process_time() - c0) / (iters + 1)  # the warm-up call included
            if side == "neuron" and wall < best[side][0]:
                stages = neuronsim._C._host_profile()
                sim_us = (neuronsim.simulated_time_ns() - t_sim0) / 1e3 / (iters + 1)
            best[side] = (min(best[side][0], wall), min(best[side][1], cpu))
    hits, misses, _ = neuronsim._C._program_cache_stats()
    lookups = (hits - hits0) + (misses - misses0)
    hit_rate = (hits - hits0) / lookups if lookups else float("nan")
    return best["cpu"], best["neuron"], stages, sim_us, hit_rate


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed loops per side and case")
    args = parser.parse_args()
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

    cases = [  # (name, make, iterations, goal ratio)
        ("add 64x64", small_add, 2000, 2.5),
        ("100 small ops", small_op_loop, 20, 3.0),
        ("matmul 256", lambda d: mm(d, 256), 200, None),
        ("matmul 1024", lambda d: mm(d, 1024), 10, 1.3),
        ("matmul 2048", lambda d: mm(d, 2048), 5, 1.3),
        ("MLP fwd+bwd", mlp_fwd_bwd, 30, None),
        ("MLP train step", train_step, 30, None),
    ]
    profile = neuronsim._C._host_profile_enabled()
    print(
        f"{'case':<18}{'cpu ms':>10}{'neuron ms':>12}{'ratio':>8}{'goal':>8}"
        f"{'cpu-time ratio':>16}{'sim us/iter':>14}"
    )
    breakdown = []
    for name, make, iters, goal in cases:
        (cpu, cpu_t), (dev, dev_t), stages, sim_us, hit_rate = best_of(make, iters, args.repeats)
        verdict = "" if goal is None else f"{'<=' if dev / cpu <= goal else '>'}{goal}"
        print(
            f"{name:<18}{cpu * 1e3:>10.3f}{dev * 1e3:>12.3f}{dev / cpu:>8.2f}{verdict:>8}"
            f"{dev_t / cpu_t:>16.2f}{sim_us:>14.2f}"
        )
        breakdown.append((name, iters, dev, stages, hit_rate))
    if profile:
        print_breakdown(breakdown)
    observer_cost([("add 64x64", small_add, 2000), ("100 small ops", small_op_loop, 20)])
    trace_cost([("add 64x64", small_add, 2000, 1), ("100 small ops", small_op_loop, 20, 100)])


def trace_cost(cases):
    """Host cost per op with a whole-program trace recording (neuronsim.tracing: every op,
    launch, kernel and instruction written to a Chrome JSON file) and without: the same loops,
    interleaved, best of five, in wall and process CPU time per op."""
    import os
    import tempfile

    from neuronsim import tracing

    goal_us = 5.0  # issue 28: at most 5 us of wall time per op extra
    print(
        f"\n{'trace per op':<18}{'off us':>10}{'on us':>12}{'extra us':>10}{'goal':>8}"
        f"{'cpu off':>10}{'cpu on':>10}{'cpu extra':>11}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        for name, make, iters, ops in cases:
            fn = make("neuron")
            wall = {False: float("inf"), True: float("inf")}
            cpu = {False: float("inf"), True: float("inf")}
            for _ in range(5):
                for on in (False, True):
                    fn()  # warm up
                    if on:
                        tracing.start(path, module_ranges=False)
                    c0, w0 = time.process_time(), time.perf_counter()
                    for _ in range(iters):
                        fn()
                    torch.neuron.synchronize()
                    if on:
                        tracing.stop()  # included: the last batches are written here
                    w = (time.perf_counter() - w0) / iters / ops
                    c = (time.process_time() - c0) / iters / ops
                    wall[on], cpu[on] = min(wall[on], w), min(cpu[on], c)
            us = 1e6
            extra = (wall[True] - wall[False]) * us
            verdict = f"{'<=' if extra <= goal_us else '>'}{goal_us:g}"
            print(
                f"{name:<18}{wall[False] * us:>10.2f}{wall[True] * us:>12.2f}"
                f"{extra:>10.2f}{verdict:>8}{cpu[False] * us:>10.2f}"
                f"{cpu[True] * us:>10.2f}{(cpu[True] - cpu[False]) * us:>11.2f}"
            )


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


def print_breakdown(rows):
    """Host microseconds per iteration and stage on the neuron side, and the program cache's
    hit rate over the case's neuron loops (warm-ups included)."""
    names = list(rows[0][3])
    print("\nhost us per iteration by stage (NEURONSIM_HOST_PROFILE=1)")
    print(
        f"{'case':<18}"
        + "".join(f"{n:>12}" for n in names)
        + f"{'outside':>12}{'ops':>8}{'cache hit':>11}"
    )
    for name, iters, wall, stages, hit_rate in rows:
        per = {n: ns / 1e3 / iters for n, (ns, _) in stages.items()}
        outside = max(0.0, wall * 1e6 - sum(per.values()))
        ops = (stages["dispatch"][1] + stages["fallback"][1]) / iters
        print(
            f"{name:<18}"
            + "".join(f"{per[n]:>12.2f}" for n in names)
            + f"{outside:>12.2f}{ops:>8.0f}{hit_rate:>11.1%}"
        )


if __name__ == "__main__":
    main()
