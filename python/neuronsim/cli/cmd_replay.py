"""``neuronsim replay``: re-times a run recorded with ``neuronsim run --record`` under another
preset or other parameters, without running its script again: the same programs, launches,
copies and host waits, every cost recomputed (clocks, bandwidths, latencies, launch and fallback
overhead). The programs stay those the kernel library built for the recorded preset, so a
parameter the library builds them for (the DMA queue count) needs `neuronsim run` instead.
"""

from __future__ import annotations

import json
import os
import sys

from neuronsim.cli import common, time_report
from neuronsim.cli.errors import CLIError, write_file
from neuronsim.cli.formatting import time_str

EXAMPLES = """\
examples:
  neuronsim run --record run.nsrun train.py
  neuronsim replay run.nsrun --set hbm.bandwidth_gbps=820
  neuronsim replay run.nsrun --preset trn2 --summary-json trn2.json"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "replay",
        help="re-time a recorded run under another preset, without running its script",
        description=__doc__.split("``: ")[1],
        epilog=EXAMPLES,
    )
    p.add_argument("log", help="a run log from `neuronsim run --record`")
    p.add_argument(
        "--preset",
        metavar="NAME|PATH",
        help="the preset to re-time with (default: the recorded run's)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a parameter on top of the recorded run's overrides (repeatable)",
    )
    p.add_argument(
        "--summary-json", metavar="OUT.json", help="write the re-timed run's times as JSON"
    )
    p.set_defaults(func=run)


def _config_of(path: str) -> dict:
    """The recorded run's configuration, read from the head of the log."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16).decode("utf-8", "replace")
    except FileNotFoundError:
        raise CLIError(f"{path}: no such file") from None
    except OSError as e:
        raise CLIError(f"{path}: cannot read ({e.strerror or e})") from None
    # The log is one JSON object whose "config" comes first (RunLog::to_json, keys sorted).
    start = head.find('"config":')
    if not head.startswith("{") or start < 0:
        raise CLIError(f"{path}: not a neuronsim run log (`neuronsim run --record` writes one)")
    try:
        config, _ = json.JSONDecoder().raw_decode(head, start + len('"config":'))
    except json.JSONDecodeError:
        raise CLIError(
            f"{path}: not a neuronsim run log (its configuration is unreadable)"
        ) from None
    return config


def summary_of(rep: dict, preset: str, overrides: list[str]) -> dict:
    """A summary document with what `whatif` reads: times, the time account, engines, limit."""
    from neuronsim.cli import trace_data

    acc = rep["time_account"]
    engines = []
    cores = set()
    for label, ns in rep["engine_busy_ns"].items():
        process, engine = label.split(" ", 1) if label.startswith("nc") else ("nc0", label)
        cores.add(process)
        engines.append(
            {
                "process": process,
                "engine": engine,
                "role": "dma" if engine.startswith("DMA") else "engine",
                "busy_ns": ns,
                "utilisation": ns / acc["window_ns"] if acc["window_ns"] else 0.0,
            }
        )
    import neuronsim

    return {
        "format": trace_data.SUMMARY_FORMAT,
        "retimed": True,
        "preset": preset,
        "overrides": overrides,
        "device_time_ns": neuronsim.simulated_time_ns(),
        "host_time_ns": neuronsim.host_time_ns(),
        "simulated_time_ns": neuronsim.simulated_time_ns(),
        "time_account": acc,
        "limit": rep["limit"],
        "engines": engines,
        "active_cores": sorted(cores),
    }


def run(args) -> int:
    recorded = _config_of(args.log)
    if args.summary_json:
        d = os.path.dirname(os.path.abspath(args.summary_json))
        if not os.path.isdir(d):
            raise CLIError(f"cannot write summary '{args.summary_json}': no such directory '{d}'")
    preset = args.preset or recorded.get("preset") or "trn1"
    overrides = [*recorded.get("overrides", []), *args.set]
    config = common.configure(preset, overrides)
    from neuronsim import _C

    try:
        _C._replay(os.path.abspath(args.log))
    except RuntimeError as e:
        raise CLIError(str(e).strip().splitlines()[0]) from None
    rep = time_report.from_runtime()
    acc = rep["time_account"]
    sets = " ".join(config["overrides"])
    print(
        f"neuronsim: re-timed {os.path.basename(args.log)} on {config['preset']}"
        f"{' ' + sets if sets else ''}: simulated time {time_str(acc['end_ns'])}",
        file=sys.stderr,
    )
    for line in time_report.closing_lines(rep):
        print(f"neuronsim: {line}", file=sys.stderr)
    if args.summary_json:
        write_file(
            args.summary_json,
            json.dumps(summary_of(rep, config["preset"], config["overrides"]), indent=1) + "\n",
        )
        print(f"neuronsim: summary written to {args.summary_json}", file=sys.stderr)
    return 0
