"""`neuronsim whatif --sensitivity`: each major hardware parameter at 0.5x and 2x of the stock
preset, ranked by its effect on the run's simulated time: "what would help?" in one command.

The script runs once, recording the programs it launched and its host's calls (`neuronsim run
--record`); each point then re-times that record under the changed preset (`neuronsim replay`),
which recomputes every cost the device model and runtime charge but keeps the programs the kernel
library built for the stock preset. A parameter the library reads to build its programs (the DMA
queue count), and any point of a run that cannot be replayed alone (a distributed run: its clock
meets the other ranks'), runs the script again instead. The output says which each point did.
"""

from __future__ import annotations

import csv
import io
import math
import os
import sys
import tempfile

from neuronsim.cli import common, time_report, whatif_runs
from neuronsim.cli.errors import CLIError, write_file
from neuronsim.cli.formatting import pct, table, time_str

# (key, what it is, whether the recorded programs can be re-timed when it changes: the kernel
# library does not build different programs for it). Matmul plans read the DMA engines'
# bandwidth: re-timed, they keep the stock preset's plan. A point whose programs do not fit the
# changed preset (fewer DMA queues than they use) fails validation, as a run would, and is listed.
PARAMETERS = (
    ("hbm.bandwidth_gbps", "HBM bandwidth", True),
    ("dma.engine_bandwidth_gbps", "DMA engine bandwidth", True),
    ("dma.queues", "DMA queues", True),
    ("tensor.frequency_ghz", "TensorE clock", True),
    ("vector.frequency_ghz", "VectorE clock", True),
    ("scalar.frequency_ghz", "ScalarE clock", True),
    ("host.kernel_launch_overhead_ns", "kernel launch overhead", True),
    ("neuronlink.link_bandwidth_gbps", "interconnect bandwidth", True),
    ("neuronlink.hop_latency_ns", "interconnect latency", True),
)
SCALES = (("0.5x", 0.5), ("2x", 2.0))


def _scaled(stock: str, factor: float) -> str:
    x = float(stock)
    if float(x).is_integer() and "." not in stock:  # counts stay integers
        return str(max(1, round(x * factor)))
    y = x * factor
    return str(int(y)) if float(y).is_integer() else f"{y:.6g}"


def _studied(args) -> list[tuple[str, str, bool]]:
    if not args.param:
        return list(PARAMETERS)
    known = {k: (k, label, same) for k, label, same in PARAMETERS}
    # A key outside the table may shape the programs: re-run for it.
    return [known.get(k, (k, k, False)) for k in dict.fromkeys(args.param)]


def run(args) -> int:
    params = _studied(args)
    stock = whatif_runs.stock_values(args.preset, args.set, [k for k, _, _ in params])
    for key, _, _ in params:
        if key not in stock:
            common.configure(args.preset, [*args.set, f"{key}=1"])  # names the unknown key
            raise CLIError(f"--param {key}: not a parameter of the preset")
    with tempfile.TemporaryDirectory(prefix="neuronsim-sensitivity-") as tmp:
        out_dir = args.out_dir or tmp
        if args.out_dir:
            os.makedirs(out_dir, exist_ok=True)
        distributed = bool(args.nproc_per_node)
        log = None if distributed else os.path.join(tmp, "run.nsrun")
        base = whatif_runs.Point({}, whatif_runs.point_path(out_dir, 0, {}), label="baseline")
        base.record = log
        whatif_runs.run_points(args, [base], "baseline run")
        info = base.result.get("run_log") or {}
        replayable = bool(log) and info.get("replayable", False)
        why_not = (
            "a distributed run's clock meets the other ranks'"
            if distributed
            else info.get("why_not", "")
        )

        points, skipped = [], []
        for key, label, same_programs in params:
            for scale, factor in SCALES:
                value = _scaled(stock[key], factor)
                if whatif_runs.same_value(value, stock[key]):
                    skipped.append(f"{key} ({scale} of {stock[key]} is itself)")
                    continue
                try:
                    common.configure(args.preset, [*args.set, f"{key}={value}"])
                except CLIError as e:
                    skipped.append(f"{key}={value} ({e})")
                    continue
                i = len(points) + 1
                p = whatif_runs.Point(
                    {key: value}, whatif_runs.point_path(out_dir, i, {key: value})
                )
                p.label, p.scale = label, scale
                if replayable and same_programs:
                    p.replay_log = log
                points.append(p)
        whatif_runs.run_points(args, points, "points", tolerate=True)
        failed = [p for p in points if p.error]
        points = [p for p in points if not p.error]
        rows = _rows(params, stock, base, points)
        _print(args, base, rows, points, replayable, why_not, info, skipped, failed)
        written = []
        if args.csv:
            write_file(args.csv, _csv(rows))
            written.append(("CSV", args.csv))
        if args.plot:
            from neuronsim.cli import cmd_whatif, plots

            base_ns = _ns(base.result)
            title = cmd_whatif.plot_title(args, f"Sensitivity (baseline {time_str(base_ns)})")
            write_file(args.plot, plots.sensitivity_png(rows, title))
            written.append(("plot", args.plot))
        if args.out_dir:
            written.append(("run summaries", args.out_dir))
        for what, path in written:
            print(f"neuronsim: {what} written to {path}", file=sys.stderr)
    return 0


def _ns(s: dict) -> float:
    from neuronsim.cli.cmd_whatif import simulated_ns

    return simulated_ns(s)


def _rows(params, stock, base, points) -> list[dict]:
    base_ns = _ns(base.result)
    rows = []
    for key, label, _ in params:
        mine = [p for p in points if key in p.values]
        if not mine:
            continue
        speedup = {p.scale: base_ns / _ns(p.result) for p in mine}
        values = {p.scale: p.values[key] for p in mine}
        how = {p.scale: "re-timed" if p.replay_log else "re-ran" for p in mine}
        effect = max(abs(math.log(s)) for s in speedup.values())
        rows.append(
            {
                "key": key,
                "label": label,
                "stock": stock[key],
                "values": values,
                "speedup": speedup,
                "how": how,
                "effect": effect,
                "limit": {
                    p.scale: time_report.from_summary(p.result)["limit"]["name"] for p in mine
                },
            }
        )
    rows.sort(key=lambda r: -r["effect"])
    return rows


def _cell(r: dict, scale: str) -> str:
    if scale not in r["speedup"]:
        return "-"
    return f"{r['speedup'][scale]:.2f}x ({r['values'][scale]})"


def _print(args, base, rows, points, replayable, why_not, info, skipped, failed) -> None:
    rep = time_report.from_summary(base.result)
    preset = args.preset or common.environment_config()["preset"]
    print(
        f"Sensitivity of {os.path.basename(args.script)} on {preset}: baseline "
        f"{time_str(_ns(base.result))}, bottleneck {time_report.bottleneck_str(rep['limit'])}"
    )
    headers = ("rank", "parameter", "key", "stock", "at 0.5x", "at 2x", "how", "bottleneck at 2x")
    body = [
        (
            i + 1,
            r["label"],
            r["key"],
            r["stock"],
            _cell(r, "0.5x"),
            _cell(r, "2x"),
            "/".join(sorted(set(r["how"].values()))),
            r["limit"].get("2x", "-"),
        )
        for i, r in enumerate(rows)
    ]
    print(table(headers, body, (True, False, False, True, True, True, False, False)))
    print("speedup of the whole run against the stock preset (the parameter's value in brackets)")
    retimed = sum(1 for p in points if p.replay_log)
    rerun = len(points) - retimed
    if retimed:
        print(
            f"re-timed the recorded programs ({info.get('launches', 0)} launches of "
            f"{info.get('programs', 0)} programs, built for the stock preset) for {retimed} "
            "points, without running the script again"
        )
    if rerun:
        reason = (
            f"the run cannot be re-timed alone: {why_not}"
            if not replayable
            else "the kernel library may build other programs for these parameters"
        )
        keys = sorted({k for p in points if not p.replay_log for k in p.values})
        print(f"re-ran the script for {rerun} points ({', '.join(keys)}): {reason}")
    if skipped:
        print(f"not run: {'; '.join(skipped)}")
    for p in failed:
        values = ", ".join(f"{k}={v}" for k, v in p.values.items())
        how = "re-timing" if p.replay_log else "the run"
        print(f"failed: {how} with {values}: {p.error}")
    top = rows[0] if rows else None
    if top and top["effect"] > 0.01:
        best = max(top["speedup"], key=lambda s: top["speedup"][s])
        print(
            f"most effect: {top['label']} ({top['key']}): {top['speedup'][best]:.2f}x at {best} "
            f"({top['values'][best]})"
        )
    elif top:
        print(f"no parameter changes the run's time by more than {pct(0.01)}")


def _csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        [
            "rank",
            "key",
            "parameter",
            "stock",
            "value_0.5x",
            "speedup_0.5x",
            "value_2x",
            "speedup_2x",
            "how",
        ]
    )
    for i, r in enumerate(rows):
        w.writerow(
            [
                i + 1,
                r["key"],
                r["label"],
                r["stock"],
                r["values"].get("0.5x", ""),
                f"{r['speedup']['0.5x']:.6f}" if "0.5x" in r["speedup"] else "",
                r["values"].get("2x", ""),
                f"{r['speedup']['2x']:.6f}" if "2x" in r["speedup"] else "",
                "/".join(sorted(set(r["how"].values()))),
            ]
        )
    return buf.getvalue()
