"""Collective benchmark of the neuron c10d backend, in the style of nccl-tests / nccom-test.

    .venv/bin/python bench/collective_bench.py --ranks 8 [--preset trn1.32xlarge]
        [--ops all_reduce,all_gather,reduce_scatter,all_to_all] [--min 1K] [--max 256M]
        [--factor 4] [--iters N] [--repeats 3] [--json out.json]

Launches the ranks with torchrun (one process per rank, each with its own simulated
NeuronCore: rank r on core r of the preset's instance) and, for every collective and size,
prints what the simulated hardware took (the collective's span on the device timeline, from
the collective model through the backend, as a user's program gets it) with nccl-tests'
algorithm and bus bandwidth, and the host wall time per collective against plain Gloo on the
same buffers as CPU tensors, measured in the same run (goal: within 1.5x).

The host comparison is made robust to a busy machine: every iteration runs the neuron
collective and the Gloo one back to back (after a barrier, in alternating order, so neither
always goes first), a repeat takes the median of each over its iterations, and the reported
times and ratio are the medians over --repeats repeats (the ratio: of the repeats' ratios). A
burst of load then moves one repeat, not the figure.

Each row ends with the machine's 1-minute load average (the higher of its values before and
after the size; the JSON output has both): on a shared machine, a ratio measured under a load
well above the core count should be re-run before it is read as the backend's.

Sizes follow nccl-tests: all_reduce the buffer, all_gather its output, reduce_scatter its
input, all_to_all one rank's input; float32 data.

Memory plan: a process holds its buffers (all_reduce: the size S; all_gather, reduce_scatter:
S + S/N; all_to_all: 2 S; the neuron tensors and the Gloo run share them) and Gloo's own
temporaries (all_gather_into_tensor and reduce_scatter_tensor allocate another S; the neuron
backend's reduce_scatter lands its peers' chunks in up to S, and a 2-rank all_reduce the peer's
data in S), so 32 processes of 256 MiB need 8 GiB (all_reduce) to 16 GiB (the others) on top of
~150 MiB each.
A size that would not fit in the memory free now is skipped with the --processes that would
fit: the same collectives timed for the same ranks (NEURON_SIM_CC_MODEL_RANKS), fewer
processes moving the data.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
BUS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
}


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = units.get(text[-1:], 1)
    return int(float(text[:-1] if text[-1:] in units else text) * scale)


def size_str(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


def process_bytes(op: str, size: int, processes: int) -> tuple[int, int]:
    """What one process needs for a collective of `size`: device buffers (the neuron tensors,
    which the Gloo run shares) and Gloo's temporary host memory (see the module docstring)."""
    if op == "all_reduce":
        # Two ranks: the peer's data lands in a scratch buffer of the size (posted data).
        return size, size if processes == 2 else 0
    if op == "all_to_all":
        return 2 * size, 0
    return size + size // processes, size


def fitting_processes(op: str, size: int, ranks: int, free: int) -> int:
    """The most processes (a divisor of ranks) whose buffers fit in `free` bytes, 0 if none."""
    for p in range(ranks, 0, -1):
        if ranks % p == 0 and p * sum(process_bytes(op, size, p)) + MARGIN <= free:
            return p
    return 0


MARGIN = 1 << 30  # left free for everything else on the machine


def available_bytes() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


# ------------------------------------------------------------------------------------------------
# One rank


def worker(args) -> None:
    import neuronsim  # noqa: F401
    import torch
    import torch.distributed as dist

    dist.init_process_group("neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    modelled = args.ranks  # the ranks the collectives are timed for (>= world)
    gloo = dist.new_group(backend="gloo")
    host_view = neuronsim._C._host_view

    def busy_ns() -> float:
        totals = neuronsim._C._collective_totals()
        return sum(t["busy_ns"] for t in totals.values())

    def buffers(op: str, size: int):
        n = size // 4
        if op == "all_reduce":
            return torch.ones(n, device="neuron"), None
        if op == "all_gather":
            return torch.ones(n // world, device="neuron"), torch.empty(n, device="neuron")
        if op == "reduce_scatter":
            return torch.ones(n, device="neuron"), torch.empty(n // world, device="neuron")
        return torch.ones(n, device="neuron"), torch.empty(n, device="neuron")

    def run(op: str, x, y, group=None):
        if op == "all_reduce":
            dist.all_reduce(x, group=group)
        elif op == "all_gather":
            dist.all_gather_into_tensor(y, x, group=group)
        elif op == "reduce_scatter":
            dist.reduce_scatter_tensor(y, x, group=group)
        else:
            dist.all_to_all_single(y, x, group=group)

    # Every rank decides to skip a size together (rank 0's view of free memory).
    results = []
    sizes = []
    s = args.min
    while s <= args.max:
        sizes.append(s)
        s *= args.factor
    for op in args.ops:
        for size in sizes:
            if size % (4 * modelled):
                continue
            # Simulated HBM pages a process touched stay resident and are reused.
            device, temp = process_bytes(op, size, world)
            resident = torch.neuron.max_memory_reserved()
            need = world * (max(0, device - resident) + temp) + MARGIN
            ok = torch.tensor([float(available_bytes() >= need)])
            dist.broadcast(ok, 0, group=gloo)
            if not ok.item():
                free = available_bytes()
                results.append(
                    {
                        "op": op,
                        "size": size,
                        "skipped": True,
                        "need_bytes": need,
                        "available_bytes": free,
                        "fits_processes": fitting_processes(op, size, modelled, free),
                    }
                )
                if rank == 0:
                    print(format_row(results[-1]), flush=True)
                continue
            x, y = buffers(op, size)
            hx, hy = host_view(x), host_view(y) if y is not None else None
            # Enough iterations for a steady median on a busy machine (5 at 256 MiB x 2 ranks).
            iters = args.iters or max(5, min(50, int(1e9 // (size * world)) + 3))
            run(op, x, y)  # warm up both paths (connections, caches)
            run(op, hx, hy, gloo)

            def timed(fn):
                dist.barrier(group=gloo)
                t = time.perf_counter()
                fn()
                return time.perf_counter() - t

            load_before = os.getloadavg()[0]
            ours = functools.partial(run, op, x, y)
            theirs = functools.partial(run, op, hx, hy, gloo)
            repeats = []  # (neuron median, gloo median) per repeat
            b0 = busy_ns()
            for _ in range(args.repeats):
                neuron_wall, gloo_wall = [], []
                for i in range(iters):
                    if i % 2:
                        gloo_wall.append(timed(theirs))
                        neuron_wall.append(timed(ours))
                    else:
                        neuron_wall.append(timed(ours))
                        gloo_wall.append(timed(theirs))
                repeats.append((statistics.median(neuron_wall), statistics.median(gloo_wall)))
            sim_ns = (busy_ns() - b0) / (iters * args.repeats)
            nw = statistics.median(r[0] for r in repeats)
            gw = statistics.median(r[1] for r in repeats)
            ratio = statistics.median(r[0] / r[1] for r in repeats)
            algbw = size / (sim_ns * 1e-9) / 1e9
            results.append(
                {
                    "op": op,
                    "size": size,
                    "ranks": modelled,
                    "processes": world,
                    "iters": iters,
                    "repeats": args.repeats,
                    "simulated_us": sim_ns / 1e3,
                    "algbw_gbps": algbw,
                    "busbw_gbps": algbw * BUS_FACTOR[op](modelled),
                    "neuron_wall_us": nw * 1e6,
                    "gloo_wall_us": gw * 1e6,
                    "ratio": ratio,
                    "repeat_ratios": [r[0] / r[1] for r in repeats],
                    # The machine's 1-minute load average before and after this size: the host
                    # times (not the ratio's two sides, measured interleaved) move with it.
                    "load": [load_before, os.getloadavg()[0]],
                }
            )
            if rank == 0:
                print(format_row(results[-1]), flush=True)
            del x, y, hx, hy
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "ranks": modelled,
                    "processes": world,
                    "preset": os.environ.get("NEURON_SIM_PRESET", ""),
                    "results": results,
                },
                f,
                indent=1,
            )
    if rank == 0:
        summarize(results)
    # Leave together, as a well-behaved job does (the peers' next-header receives need no
    # connection to a rank that has left; see NeuronBackend::post_next_header_recvs).
    dist.barrier(group=gloo)
    dist.destroy_process_group()


HEADER = (
    f"{'op':>15} {'size':>10} {'sim time(us)':>13} {'algbw(GB/s)':>12} {'busbw(GB/s)':>12}"
    f" {'neuron wall(us)':>16} {'gloo wall(us)':>14} {'ratio':>6} {'load':>5}"
)


def format_row(r: dict) -> str:
    if r.get("skipped"):
        fits = r["fits_processes"]
        return (
            f"{r['op']:>15} {size_str(r['size']):>10}  skipped: needs "
            f"{r['need_bytes'] / 2**30:.1f} GiB, {r['available_bytes'] / 2**30:.1f} GiB free"
            + (f" (fits with --processes {fits})" if fits else "")
        )
    return (
        f"{r['op']:>15} {size_str(r['size']):>10} {r['simulated_us']:>13.1f} "
        f"{r['algbw_gbps']:>12.2f} {r['busbw_gbps']:>12.2f} {r['neuron_wall_us']:>16.1f} "
        f"{r['gloo_wall_us']:>14.1f} {r['ratio']:>6.2f} {max(r['load']):>5.1f}"
    )


def summarize(results: list[dict]) -> None:
    done = [r for r in results if not r.get("skipped")]
    if not done:
        return
    ratios = [r["ratio"] for r in done]
    worst = max(done, key=lambda r: r["ratio"])
    within = sum(1 for x in ratios if x <= 1.5)
    print(
        f"host wall time vs plain Gloo: median ratio {statistics.median(ratios):.2f}, "
        f"{within}/{len(ratios)} sizes within 1.5x, worst {worst['ratio']:.2f} "
        f"({worst['op']} {size_str(worst['size'])})"
    )
    for op in OPS:
        rows = [r for r in done if r["op"] == op]
        if rows:
            print(
                f"{op}: latency floor {rows[0]['simulated_us']:.1f} us at "
                f"{size_str(rows[0]['size'])}, bus bandwidth {rows[-1]['busbw_gbps']:.1f} GB/s "
                f"at {size_str(rows[-1]['size'])}"
            )


# ------------------------------------------------------------------------------------------------
# The launcher


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=2, help="ranks the collectives are timed for")
    p.add_argument(
        "--processes",
        type=int,
        default=0,
        help="processes that move the data (default: one per rank); fewer processes each stand "
        "for ranks/processes ranks on consecutive NeuronCores (NEURON_SIM_CC_MODEL_RANKS): "
        "the collective model is the same, the machine holds fewer buffers",
    )
    p.add_argument("--preset", default="trn1.32xlarge")
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--min", default="1K")
    p.add_argument("--max", default="256M")
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--iters", type=int, default=0, help="per size (default: by size)")
    p.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="repeats of the interleaved iterations; the medians over them are reported",
    )
    p.add_argument("--json", help="write the results as JSON")
    worker_argv = os.environ.get("COLLECTIVE_BENCH_ARGS")
    args = p.parse_args(json.loads(worker_argv) if worker_argv else argv)
    args.ops = [o for o in args.ops.split(",") if o]
    bad = [o for o in args.ops if o not in OPS]
    if bad:
        p.error(f"unknown op(s) {bad}; choose from {', '.join(OPS)}")
    args.min, args.max = parse_size(args.min), parse_size(args.max)
    if worker_argv:
        worker(args)
        return 0
    processes = args.processes or args.ranks
    if processes < 1 or args.ranks % processes:
        p.error(f"--ranks {args.ranks} is not a multiple of --processes {processes}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON_")}
    env.update(
        NEURON_SIM_PRESET=args.preset,
        OMP_NUM_THREADS="1",
        PYTHONWARNINGS="ignore",
        COLLECTIVE_BENCH_ARGS=json.dumps(sys.argv[1:] if argv is None else argv),
    )
    moved = ""
    if processes != args.ranks:
        env["NEURON_SIM_CC_MODEL_RANKS"] = str(args.ranks)
        moved = f" (the data moved by {processes} processes)"
    print(
        f"collective benchmark: {args.ranks} ranks of {args.preset}{moved}, float32, "
        f"{size_str(args.min)} .. {size_str(args.max)}"
    )
    print(HEADER, flush=True)
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        str(processes),
        os.path.abspath(__file__),
    ]
    return subprocess.run(cmd, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
