"""``neuronsim whatif``: a script run under every combination of parameter sweeps, in parallel
processes (each simulated device is configured once per process), compared in one table.

Each combination is a ``neuronsim run --summary-json`` subprocess; the table lists the swept
values, the simulated time (device clock), the speedup against the first combination, the
bottleneck and each engine's utilisation. Simulated time is deterministic, so the same inputs
give the same table whatever the order the runs finish in.
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import os
import re
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor

from neuronsim.cli import common, progress, trace_data
from neuronsim.cli.errors import CLIError, write_file
from neuronsim.cli.formatting import pct, table, time_str


def add_parser(sub) -> None:
    p = sub.add_parser(
        "whatif",
        help="sweep preset parameters over a script",
        description=__doc__.split("``: ")[1].split("\n\n")[0],
    )
    common.add_config_options(p)
    p.add_argument(
        "--sweep",
        action="append",
        default=[],
        required=True,
        metavar="KEY=V1,V2,...",
        help="values of one parameter (repeatable: every combination runs)",
    )
    p.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="runs in parallel (default: the number of CPUs)",
    )
    p.add_argument(
        "--plot", metavar="OUT.png", help="simulated time against the first sweep's values"
    )
    p.add_argument("--csv", metavar="OUT.csv", help="the table as CSV")
    p.add_argument(
        "--out-dir",
        metavar="DIR",
        help="keep each run's summary JSON here (inputs for `neuronsim diff`)",
    )
    p.add_argument(
        "--nproc-per-node",
        type=int,
        metavar="N",
        help="a torch.distributed script: each combination runs N ranks (neuronsim run "
        "--nproc-per-node N); the simulated time is the last rank's",
    )
    p.add_argument("script", nargs="?", help="Python script to run")
    p.add_argument(
        "script_args", nargs=argparse.REMAINDER, metavar="args", help="arguments for the script"
    )
    p.set_defaults(func=run)


def parse_sweep(text: str) -> tuple[str, list[str]]:
    key, sep, rest = text.partition("=")
    values = [v.strip() for v in rest.split(",")]
    if not sep or not key.strip() or any(c.isspace() for c in key.strip()) or not all(values):
        raise CLIError(
            f"malformed --sweep '{text}': expected KEY=V1,V2,..., e.g. hbm.bandwidth_gbps=410,820"
        )
    if len(set(values)) != len(values):
        raise CLIError(f"malformed --sweep '{text}': a value is repeated")
    return key.strip(), values


def combinations(sweeps: list[tuple[str, list[str]]]) -> list[dict[str, str]]:
    """Every combination, the first sweep varying slowest."""
    keys = [k for k, _ in sweeps]
    return [
        dict(zip(keys, vals, strict=True)) for vals in itertools.product(*(v for _, v in sweeps))
    ]


def _slug(values: dict[str, str]) -> str:
    return ",".join(re.sub(r"[^A-Za-z0-9._=+-]+", "-", f"{k}={v}") for k, v in values.items())


def _child_command(args, values: dict[str, str], summary_path: str) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "neuronsim",
        "run",
        "--progress",
        "never",
        "--summary-json",
        summary_path,
    ]
    if args.preset:
        cmd += ["--preset", args.preset]
    if args.nproc_per_node:
        cmd += ["--nproc-per-node", str(args.nproc_per_node)]
    for s in [*args.set, *(f"{k}={v}" for k, v in values.items())]:
        cmd += ["--set", s]
    return [*cmd, args.script, *args.script_args]


def _last_error_line(stderr: str) -> str:
    lines = [
        ln.strip() for ln in stderr.splitlines() if ln.strip() and not ln.startswith("neuronsim: ")
    ]
    errors = [ln for ln in stderr.splitlines() if ln.startswith("neuronsim: error:")]
    if errors:
        return errors[-1][len("neuronsim: error: ") :]
    return lines[-1] if lines else "no output"


def run_sweep(args, combos: list[dict[str, str]], out_dir: str) -> list[dict]:
    status = progress.enabled("auto")
    done, lock = [0], threading.Lock()

    def one(i: int) -> dict:
        path = os.path.join(out_dir, f"{i:03d}_{_slug(combos[i])}.json")
        proc = subprocess.run(_child_command(args, combos[i], path), capture_output=True, text=True)
        with lock:
            done[0] += 1
            if status:
                sys.stderr.write(f"\rneuronsim whatif: {done[0]}/{len(combos)} runs done")
                sys.stderr.flush()
        if proc.returncode != 0 or not os.path.exists(path):
            what = ", ".join(f"{k}={v}" for k, v in combos[i].items())
            raise CLIError(
                f"the run with {what} failed (exit code {proc.returncode}): "
                f"{_last_error_line(proc.stderr)}",
                exit_code=1,
            )
        return {"values": combos[i], "summary": trace_data.load_summary(path), "path": path}

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(one, i) for i in range(len(combos))]
        results = [f.result() for f in futures]
    if status:
        sys.stderr.write("\n")
    return results


def rows_of(sweeps, results: list[dict]) -> tuple[list[str], list[dict]]:
    """Table rows (combination order) and the engines with work in any run."""
    engines: list[str] = []
    for r in results:
        for name, util in trace_data.engine_utilisation(r["summary"]).items():
            if util > 0 and name not in engines:
                engines.append(name)
    engines = trace_data.sort_engines(engines)
    base = results[0]["summary"]["device_time_ns"]
    rows = []
    for r in results:
        s = r["summary"]
        util = trace_data.engine_utilisation(s)
        rows.append(
            {
                "values": r["values"],
                "simulated_time_ns": s["device_time_ns"],
                "host_time_ns": s["host_time_ns"],
                "speedup": base / s["device_time_ns"] if s["device_time_ns"] > 0 else 0.0,
                "bottleneck": trace_data.short_engine(s, s["bottleneck"]) or "-",
                "bottleneck_utilisation": s["bottleneck_utilisation"],
                "utilisation": {e: util.get(e, 0.0) for e in engines},
                "summary_json": r["path"],
            }
        )
    return engines, rows


def format_table(sweeps, engines: list[str], rows: list[dict]) -> str:
    headers = [k for k, _ in sweeps] + ["simulated time", "speedup", "bottleneck"] + engines
    body = [
        [r["values"][k] for k, _ in sweeps]
        + [time_str(r["simulated_time_ns"]), f"{r['speedup']:.2f}x", r["bottleneck"]]
        + [pct(r["utilisation"][e]) for e in engines]
        for r in rows
    ]
    right = [True] * len(sweeps) + [True, True, False] + [True] * len(engines)
    return table(headers, body, right)


def format_csv(sweeps, engines: list[str], rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        [k for k, _ in sweeps]
        + ["simulated_time_ns", "host_time_ns", "speedup", "bottleneck", "bottleneck_utilisation"]
        + [f"util {e}" for e in engines]
    )
    for r in rows:
        w.writerow(
            [r["values"][k] for k, _ in sweeps]
            + [
                r["simulated_time_ns"],
                r["host_time_ns"],
                f"{r['speedup']:.6f}",
                r["bottleneck"],
                f"{r['bottleneck_utilisation']:.6f}",
            ]
            + [f"{r['utilisation'][e]:.6f}" for e in engines]
        )
    return buf.getvalue()


def run(args) -> int:
    sweeps = [parse_sweep(s) for s in args.sweep]
    keys = [k for k, _ in sweeps]
    if len(set(keys)) != len(keys):
        raise CLIError(
            f"--sweep: the key '{next(k for k in keys if keys.count(k) > 1)}' is swept twice"
        )
    if args.jobs < 1:
        raise CLIError(f"--jobs must be at least 1, got {args.jobs}")
    if not args.script:
        raise CLIError(
            f"missing the script to run (neuronsim {args.command} [options] script.py [args])"
        )
    script = os.path.abspath(args.script)
    if not os.path.isfile(script):
        raise CLIError(f"script '{args.script}' not found")
    combos = combinations(sweeps)
    # Every combination is checked here, in this process (which never uses the device), so a
    # bad key or value fails at once with the runtime's message instead of in every run.
    for values in combos:
        common.configure(args.preset, [*args.set, *(f"{k}={v}" for k, v in values.items())])

    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        results = run_sweep(args, combos, args.out_dir)
    else:
        with tempfile.TemporaryDirectory(prefix="neuronsim-whatif-") as d:
            results = run_sweep(args, combos, d)
    engines, rows = rows_of(sweeps, results)
    print(format_table(sweeps, engines, rows))
    if args.csv:
        write_file(args.csv, format_csv(sweeps, engines, rows))
    if args.plot:
        from neuronsim.cli import plots

        write_file(args.plot, plots.sweep_png(sweeps, rows))
    return 0
