"""``neuronsim whatif``: a script under every combination of parameter sweeps, or a sensitivity
study of the major hardware parameters, compared with the stock preset (the baseline).

Each combination is a ``neuronsim run --summary-json`` subprocess, run in parallel; the table
lists the swept values, the simulated time, the speedup against the baseline (the preset's own
values, run as well when the sweep leaves them out), the bottleneck, what changed against the
baseline and each engine's utilisation. Simulated time is deterministic, so the same inputs give
the same table whatever order the runs finish in.
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import os
import sys
import tempfile

from neuronsim.cli import common, explain, sweep_values, time_report, trace_data, whatif_runs
from neuronsim.cli.errors import CLIError, write_file
from neuronsim.cli.formatting import pct, table, time_str

EXAMPLES = """\
examples:
  neuronsim whatif --sensitivity train.py
      each major parameter at 0.5x and 2x, ranked by its effect (re-times the recorded
      programs where it can, and says so)
  neuronsim whatif --sweep hbm.bandwidth_gbps=410:1640:x2 --plot bw.png train.py
  neuronsim whatif --sweep host.kernel_launch_overhead_ns=0,5000,10000 train.py
  neuronsim whatif --sweep tensor.frequency_ghz=1.4..5.6/4 --sweep hbm.bandwidth_gbps=410,820 \\
      --csv out.csv train.py

The baseline is the preset's own value of each swept key (with --set applied), marked in the
table and plots whatever the sweep's order; it runs as well when the sweep leaves it out."""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "whatif",
        help="sweep preset parameters over a script, or rank them by their effect",
        description=__doc__.split("``: ")[1].split("\n\n")[0],
        epilog=EXAMPLES,
    )
    common.add_config_options(p)
    p.add_argument(
        "--sweep", action="append", default=[], metavar="KEY=VALUES", help=sweep_values.HELP
    )
    p.add_argument(
        "--sensitivity",
        action="store_true",
        help="instead of sweeps: each major parameter (HBM and DMA bandwidth, DMA queues, "
        "engine clocks, launch overhead, interconnect) at 0.5x and 2x of the preset, ranked by "
        "the effect on the run's time",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY",
        help="with --sensitivity: study these keys instead of the major parameters (repeatable)",
    )
    p.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=os.cpu_count() or 1,
        metavar="N",
        help=f"runs in parallel (default: the number of CPUs, {os.cpu_count() or 1} here)",
    )
    p.add_argument(
        "--plot",
        metavar="OUT.png",
        help="the simulated time against the first sweep's values (with --sensitivity: the "
        "ranking)",
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
    p.add_argument("script", help="the Python script to run")
    p.add_argument(
        "script_args", nargs=argparse.REMAINDER, metavar="args", help="arguments for the script"
    )
    p.set_defaults(func=run)


parse_sweep = sweep_values.parse_sweep


def combinations(sweeps: list[tuple[str, list[str]]]) -> list[dict[str, str]]:
    """Every combination, the first sweep varying slowest."""
    keys = [k for k, _ in sweeps]
    return [
        dict(zip(keys, vals, strict=True)) for vals in itertools.product(*(v for _, v in sweeps))
    ]


def simulated_ns(s: dict) -> float:
    """A run's simulated time: its window's end (the later of the host and device clocks)."""
    acc = s.get("time_account")
    return acc["end_ns"] if acc else s["device_time_ns"]


def rows_of(sweeps, points: list[whatif_runs.Point], base: whatif_runs.Point) -> tuple:
    """Table rows (the baseline first when the sweep left it out, then combination order) and
    the engines with work in any run."""
    engines: list[str] = []
    for p in points:
        for name, util in trace_data.engine_utilisation(p.result).items():
            if util > 0 and name not in engines:
                engines.append(name)
    engines = trace_data.sort_engines(engines)
    base_ns = simulated_ns(base.result)
    base_rep = time_report.from_summary(base.result)
    rows = []
    for p in points:
        s = p.result
        rep = base_rep if p is base else time_report.from_summary(s)
        util = trace_data.engine_utilisation(s)
        t = simulated_ns(s)
        rows.append(
            {
                "values": p.values,
                "baseline": p is base,
                "label": p.label,
                "simulated_time_ns": t,
                "device_time_ns": s["device_time_ns"],
                "host_time_ns": s["host_time_ns"],
                "speedup": base_ns / t if t > 0 else 0.0,
                "bottleneck": rep["limit"]["name"] or "-",
                "bottleneck_share": rep["limit"]["share"],
                "what_changed": explain.what_changed(base_rep, rep),
                "utilisation": {e: util.get(e, 0.0) for e in engines},
                "summary_json": p.summary_path,
            }
        )
    return engines, rows


def _values_cells(sweeps, r) -> list[str]:
    mark = " *" if r["baseline"] else ""
    return [r["values"][k] + (mark if i == 0 else "") for i, (k, _) in enumerate(sweeps)]


def format_table(sweeps, engines: list[str], rows: list[dict]) -> str:
    headers = (
        [k for k, _ in sweeps]
        + ["simulated time", "speedup", "bottleneck", "what changed against the baseline"]
        + engines
    )
    body = [
        _values_cells(sweeps, r)
        + [
            time_str(r["simulated_time_ns"]),
            "baseline" if r["baseline"] else f"{r['speedup']:.2f}x",
            f"{r['bottleneck']} ({pct(r['bottleneck_share'])})",
            r["what_changed"],
        ]
        + [pct(r["utilisation"][e]) for e in engines]
        for r in rows
    ]
    right = [True] * len(sweeps) + [True, True, False, False] + [True] * len(engines)
    return table(headers, body, right)


def format_csv(sweeps, engines: list[str], rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        [k for k, _ in sweeps]
        + [
            "simulated_time_ns",
            "host_time_ns",
            "speedup",
            "baseline",
            "bottleneck",
            "bottleneck_utilisation",
            "what_changed",
        ]
        + [f"util {e}" for e in engines]
    )
    for r in rows:
        w.writerow(
            [r["values"][k] for k, _ in sweeps]
            + [
                r["simulated_time_ns"],
                r["host_time_ns"],
                f"{r['speedup']:.6f}",
                int(r["baseline"]),
                r["bottleneck"],
                f"{r['bottleneck_share']:.6f}",
                r["what_changed"],
            ]
            + [f"{r['utilisation'][e]:.6f}" for e in engines]
        )
    return buf.getvalue()


def _check_script(args) -> str:
    script = os.path.abspath(args.script)
    if not os.path.isfile(script):
        raise CLIError(f"script '{args.script}' not found")
    if args.jobs < 1:
        raise CLIError(f"--jobs must be at least 1, got {args.jobs}")
    return script


def plot_title(args, what: str) -> str:
    preset = args.preset or common.environment_config()["preset"]
    sets = f" ({', '.join(args.set)})" if args.set else ""
    return f"{what}: {os.path.basename(args.script)} on {preset}{sets}"


def run(args) -> int:
    if args.sensitivity:
        if args.sweep:
            raise CLIError("--sweep and --sensitivity do not go together: choose one")
        _check_script(args)
        from neuronsim.cli import sensitivity

        return sensitivity.run(args)
    if args.param:
        raise CLIError("--param goes with --sensitivity")
    if not args.sweep:
        raise CLIError("nothing to sweep: give --sweep KEY=VALUES (or --sensitivity)")
    sweeps = [parse_sweep(s) for s in args.sweep]
    keys = [k for k, _ in sweeps]
    if len(set(keys)) != len(keys):
        raise CLIError(
            f"--sweep: the key '{next(k for k in keys if keys.count(k) > 1)}' is swept twice"
        )
    _check_script(args)
    combos = combinations(sweeps)
    # Every combination is checked here, in this process (which never uses the device), so a
    # bad key or value fails at once with the runtime's message instead of in every run.
    for values in combos:
        common.configure(args.preset, [*args.set, *(f"{k}={v}" for k, v in values.items())])
    stock = whatif_runs.stock_values(args.preset, args.set, keys)

    def go(out_dir: str) -> int:
        points = [
            whatif_runs.Point(v, whatif_runs.point_path(out_dir, i, v))
            for i, v in enumerate(combos)
        ]
        base = next(
            (
                p
                for p in points
                if all(whatif_runs.same_value(p.values[k], stock.get(k, "")) for k in keys)
            ),
            None,
        )
        if base is None:  # the sweep leaves the stock values out: run them too
            base = whatif_runs.Point(
                dict(stock), whatif_runs.point_path(out_dir, len(points), stock)
            )
            base.label = "stock preset"
            points.insert(0, base)
        whatif_runs.run_points(args, points)
        engines, rows = rows_of(sweeps, points, base)
        print(format_table(sweeps, engines, rows))
        print("* the stock preset's values: the baseline of every speedup")
        written = []
        if args.csv:
            write_file(args.csv, format_csv(sweeps, engines, rows))
            written.append(("CSV", args.csv))
        if args.plot:
            from neuronsim.cli import plots

            title = plot_title(args, "neuronsim what-if")
            write_file(args.plot, plots.sweep_png(sweeps, rows, title))
            written.append(("plot", args.plot))
        if args.out_dir:
            written.append(("run summaries", args.out_dir))
        for what, path in written:
            print(f"neuronsim: {what} written to {path}", file=sys.stderr)
        return 0

    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        return go(args.out_dir)
    with tempfile.TemporaryDirectory(prefix="neuronsim-whatif-") as d:
        return go(d)
