"""``neuronsim run`` for distributed scripts.

Two ways in, one result (one trace per rank, merged into the requested ``--trace``):
- ``neuronsim run --nproc-per-node N script.py``: this process launches the N ranks with
  torchrun (``python -m torch.distributed.run --standalone ... -m neuronsim run ...``), waits for
  them, then merges their traces and prints the per-rank breakdown;
- ``torchrun --nproc-per-node N -m neuronsim run --trace t.json script.py`` (or any launcher
  that sets RANK and WORLD_SIZE): every rank writes ``t.rank<R>.json``; rank 0 waits for the
  others' traces and merges them into ``t.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from neuronsim.cli import ranks, trace_data
from neuronsim.cli.errors import CLIError, write_file

PARENT_ENV = "NEURONSIM_RUN_PARENT"  # set by the launching `neuronsim run` for its ranks
MERGE_TIMEOUT_S = 300.0


def rank_and_world() -> tuple[int, int] | None:
    """(rank, world size) when this process is one rank of a multi-rank job."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
    except ValueError:
        return None
    return (rank, world) if world > 1 else None


def launched_by_parent() -> bool:
    return os.environ.get(PARENT_ENV) == "1"


def launch(args, script: str) -> int:
    """The parent: runs the ranks under torchrun, merges their traces, writes the outputs."""
    n = args.nproc_per_node
    if n < 1:
        raise CLIError(f"--nproc-per-node must be at least 1, got {n}")
    want = bool(args.trace or args.report or args.summary_json)
    with tempfile.TemporaryDirectory(prefix="neuronsim-ranks-") as tmp:
        # With --trace the ranks' own traces stay beside the merged one (out.rank<R>.json):
        # `neuronsim report --rank R` reads them.
        base = os.path.abspath(args.trace) if args.trace else os.path.join(tmp, "trace.json")
        child = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            str(n),
            "-m",
            "neuronsim",
            "run",
            "--progress",
            "never",
        ]
        if args.preset:
            child += ["--preset", args.preset]
        for s in args.set:
            child += ["--set", s]
        if want:
            child += ["--trace", base]
        child += [script, *args.script_args]
        env = dict(os.environ, **{PARENT_ENV: "1"})
        code = subprocess.run(child, env=env).returncode
        if not want:
            return code
        paths = [ranks.rank_path(base, r) for r in range(n)]
        missing = [p for p in paths if not os.path.exists(ranks.done_marker(p))]
        if missing:
            print(f"neuronsim: error: {len(missing)} of {n} ranks left no trace", file=sys.stderr)
            return code or 1
        write_outputs(args, paths, args.trace or os.path.join(tmp, "merged.json"))
    return code


def write_outputs(args, paths: list[str], merged_path: str) -> None:
    """Merges the rank traces into `merged_path` and writes --summary-json and --report."""
    ranks.merge(paths, merged_path)
    rows = ranks.breakdown(paths)
    print(ranks.format_breakdown(rows), file=sys.stderr)
    if args.trace:
        print(
            f"neuronsim: merged trace of {len(paths)} ranks written to {args.trace}",
            file=sys.stderr,
        )
    if args.summary_json or args.report:
        summary = trace_data.summarize(trace_data.load(paths[0]))
        metas = [ranks.read_metadata(p) for p in paths]
        # The job ends when its last rank does.
        summary["device_time_ns"] = max(float(m.get("device_time_ns", 0)) for m in metas)
        summary["host_time_ns"] = max(float(m.get("host_time_ns", 0)) for m in metas)
        summary["simulated_time_ns"] = summary["device_time_ns"]
        summary["ranks"] = rows
        summary["trace"] = os.path.abspath(args.trace) if args.trace else None
        if args.summary_json:
            write_file(args.summary_json, json.dumps(summary, indent=1, sort_keys=True) + "\n")
            print(f"neuronsim: summary written to {args.summary_json}", file=sys.stderr)
        if args.report:
            from neuronsim.cli import html_report

            html_report.write(args.report, summary)
            print(f"neuronsim: report (rank 0) written to {args.report}", file=sys.stderr)


def rank_outputs(args) -> dict:
    """In a rank of a multi-rank job: this rank's own trace path (the requested one with
    .rank<R>), no per-rank summary or report; returns what was asked for, for rank 0's merge."""
    rank, _ = rank_and_world()
    asked = {"trace": args.trace, "report": args.report, "summary_json": args.summary_json}
    if args.trace or args.report or args.summary_json:
        base = args.trace or os.path.join(
            tempfile.gettempdir(),
            f"neuronsim-job-{os.environ.get('TORCHELASTIC_RUN_ID', 'run')}.json",
        )
        args.trace = ranks.rank_path(base, rank)
        asked["base"] = base
    args.report = args.summary_json = None
    return asked


def finish_rank(asked: dict, trace_written: bool) -> None:
    """After this rank's trace is complete: mark it, and on rank 0 (when no parent does it)
    merge every rank's trace into the requested outputs."""
    if not asked.get("base") or not trace_written:
        return
    rank, world = rank_and_world()
    with open(ranks.done_marker(ranks.rank_path(asked["base"], rank)), "w"):
        pass
    if rank != 0 or launched_by_parent():
        return
    paths = [ranks.rank_path(asked["base"], r) for r in range(world)]
    missing = ranks.wait_for(paths, MERGE_TIMEOUT_S)
    if missing:
        raise CLIError(f"{len(missing)} ranks' traces did not appear: {', '.join(missing)}")

    class Out:
        trace = asked["trace"] or asked["base"]
        report = asked["report"]
        summary_json = asked["summary_json"]

    write_outputs(Out, paths, Out.trace)
