"""Host memory of a long traced run: a script of N small ops under `neuronsim run`, without a
trace and with `--trace` (the recording, its final write and the summary `run` prints, which
reads the file back), as the user runs it. Prints the wall time, the process's peak resident
memory (max RSS) and the trace's size on disk, for two op counts: what grows with the op count
is the trace file, not the process.

    .venv/bin/python bench/trace_memory_bench.py            # 10k and 100k ops
    .venv/bin/python bench/trace_memory_bench.py --ops 100000

The script (`--script`, written to a temporary directory) is a loop of
`y = (y * 0.5 + 1.0).relu() - x` on 32 x 32 fp32 neuron tensors: four native ops per iteration.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

SCRIPT = """\
import sys
import torch

ops = int(sys.argv[1])
x = torch.randn(32, 32, device="neuron")
y = x
for _ in range(ops // 4):
    y = (y * 0.5 + 1.0).relu() - x
torch.neuron.synchronize()
print(f"{ops // 4 * 4} ops, sum {float(y.sum()):.3f}")
"""


def run(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and the command's max RSS in MiB (measured by a fresh interpreter whose only
    child it is, so RUSAGE_CHILDREN's maximum is the command's own)."""
    probe = [sys.executable, "-c", _MEASURE, *cmd]
    t0 = time.perf_counter()
    out = subprocess.run(probe, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr[-3000:]}")
    return wall, float(out.stdout.strip().splitlines()[-1]) / 1024


# Runs the command in a child of a fresh process and prints that child's max RSS (KiB).
_MEASURE = """\
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, nargs="+", default=[10_000, 100_000])
    args = parser.parse_args()
    neuronsim = os.path.join(os.path.dirname(sys.executable), "neuronsim")
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    print(f"{'ops':>8} {'run':<14} {'wall s':>8} {'max RSS MiB':>12} {'trace MiB':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "small_ops.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        trace = os.path.join(tmp, "trace.json")
        for ops in args.ops:
            for traced in (False, True):
                cmd = [neuronsim, "run", "--progress", "never"]
                if traced:
                    cmd += ["--trace", trace]
                wall, rss = run([*cmd, script, str(ops)])
                size = os.path.getsize(trace) / 2**20 if traced else float("nan")
                label = "--trace" if traced else "no trace"
                print(f"{ops:>8} {label:<14} {wall:>8.1f} {rss:>12.0f} {size:>10.1f}")
                if traced:
                    os.unlink(trace)


if __name__ == "__main__":
    main()
