"""``neuronsim diff``: two runs compared: total simulated time, engine by engine, op by op."""

from __future__ import annotations

import json

from neuronsim.cli import trace_data
from neuronsim.cli.errors import CLIError
from neuronsim.cli.formatting import pct, rate_str, ratio_str, table, time_str


def add_parser(sub) -> None:
    p = sub.add_parser(
        "diff",
        help="compare two runs",
        description=__doc__.split("``: ")[1],
        epilog="examples:\n  neuronsim diff before.json after.json\n"
        "  neuronsim diff runs/000_stock.json runs/001_hbm.bandwidth_gbps=820.json --top 5",
    )
    p.add_argument("a", help="trace or `neuronsim run --summary-json` file (baseline)")
    p.add_argument("b", help="trace or summary file to compare with the baseline")
    p.add_argument(
        "--top",
        type=int,
        default=20,
        metavar="N",
        help="ops shown, largest change first (default 20)",
    )
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.set_defaults(func=run)


def _delta_str(ns: float) -> str:
    return ("+" if ns >= 0 else "-") + time_str(abs(ns))


def compare(a: dict, b: dict) -> dict:
    """The comparison of two summaries (traces/src/diff.cpp): totals, engines, ops."""
    from neuronsim import _C

    return json.loads(_C._summary_diff(json.dumps(a), json.dumps(b)))


def text(a: dict, b: dict, d: dict, names: tuple[str, str], top: int) -> str:
    from neuronsim.cli.sections import overrides_str

    out = [
        f"A = {names[0]} (preset {a['preset']}, overrides: {overrides_str(a)})",
        f"B = {names[1]} (preset {b['preset']}, overrides: {overrides_str(b)})",
        "",
    ]
    rows = [
        (
            "simulated time (device)",
            time_str(a["device_time_ns"]),
            time_str(b["device_time_ns"]),
            _delta_str(b["device_time_ns"] - a["device_time_ns"]),
            ratio_str(a["device_time_ns"], b["device_time_ns"]),
        ),
        (
            "host time",
            time_str(a["host_time_ns"]),
            time_str(b["host_time_ns"]),
            _delta_str(b["host_time_ns"] - a["host_time_ns"]),
            ratio_str(a["host_time_ns"], b["host_time_ns"]),
        ),
        (
            "TensorE FLOP/s",
            rate_str(a["achieved_flops_per_s"], "FLOP/s"),
            rate_str(b["achieved_flops_per_s"], "FLOP/s"),
            "",
            ratio_str(a["achieved_flops_per_s"], b["achieved_flops_per_s"]),
        ),
        (
            "HBM bandwidth",
            rate_str(a["achieved_hbm_bytes_per_s"], "B/s"),
            rate_str(b["achieved_hbm_bytes_per_s"], "B/s"),
            "",
            ratio_str(a["achieved_hbm_bytes_per_s"], b["achieved_hbm_bytes_per_s"]),
        ),
        (
            "bottleneck",
            f"{a['bottleneck'] or '-'} ({pct(a['bottleneck_utilisation'])})",
            f"{b['bottleneck'] or '-'} ({pct(b['bottleneck_utilisation'])})",
            "",
            "",
        ),
    ]
    out.append(table(("", "A", "B", "B-A", "B/A"), rows))
    out += [
        "",
        "Engines",
        table(
            ("engine", "busy A", "busy B", "B/A", "util A", "util B"),
            [
                (
                    e["engine"],
                    time_str(e["busy_ns_a"]),
                    time_str(e["busy_ns_b"]),
                    ratio_str(e["busy_ns_a"], e["busy_ns_b"]),
                    pct(e["utilisation_a"]),
                    pct(e["utilisation_b"]),
                )
                for e in d["engines"]
            ],
        ),
    ]
    shown = d["ops"][:top]
    out += [
        "",
        f"Ops by change in device time ({len(shown)} of {len(d['ops'])})",
        table(
            ("op", "count A", "count B", "time A", "time B", "B-A", "B/A"),
            [
                (
                    o["op"],
                    o["count_a"],
                    o["count_b"],
                    time_str(o["time_ns_a"]),
                    time_str(o["time_ns_b"]),
                    _delta_str(o["delta_ns"]),
                    f"{o['ratio']:.3f}x" if o["ratio"] is not None else "-",
                )
                for o in shown
            ],
        ),
    ]
    return "\n".join(out)


def run(args) -> int:
    if args.top < 1:
        raise CLIError(f"--top must be at least 1, got {args.top}")
    a, b = trace_data.load_summary(args.a), trace_data.load_summary(args.b)
    d = compare(a, b)
    print(
        json.dumps(d, indent=1, sort_keys=True)
        if args.json
        else text(a, b, d, (args.a, args.b), args.top)
    )
    return 0
