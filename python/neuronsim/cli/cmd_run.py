"""``neuronsim run``: a script on the simulated device, optionally traced, summarised, reported.

The simulator is configured before the script is imported; the script runs as ``__main__`` with
``sys.argv = [script, *args]``. Its exceptions print the usual traceback (exit code 1) and its
``sys.exit`` codes pass through; the trace, summary and report are written in every case.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import tempfile
import traceback

from neuronsim.cli import common, distributed_run, progress, trace_data
from neuronsim.cli.errors import CLIError, write_file
from neuronsim.cli.formatting import pct, time_str


def add_parser(sub) -> None:
    p = sub.add_parser(
        "run",
        help="run a script on the simulated device",
        description=__doc__.split("``: ")[1].split("\n\n")[0],
    )
    common.add_config_options(p)
    p.add_argument(
        "--trace", metavar="OUT.json", help="record the whole run (open in ui.perfetto.dev)"
    )
    p.add_argument("--report", metavar="OUT.html", help="write an HTML report of the run")
    p.add_argument(
        "--summary-json",
        metavar="OUT.json",
        help="write the run's summary (times, engines, ops, kernels) as JSON",
    )
    p.add_argument(
        "--nproc-per-node",
        type=int,
        metavar="N",
        help="run N ranks of a torch.distributed script (torchrun on this host) and merge their "
        "traces; under torchrun itself each rank writes <trace>.rank<R>.json and rank 0 merges",
    )
    p.add_argument(
        "--progress",
        choices=("auto", "always", "never"),
        default="auto",
        help="status line on stderr every second (auto: when stderr is a terminal)",
    )
    p.add_argument("script", nargs="?", help="Python script to run")
    p.add_argument(
        "script_args",
        nargs=argparse.REMAINDER,
        metavar="args",
        help="arguments passed to the script",
    )
    p.set_defaults(func=run)


def _writable(path: str | None, what: str) -> None:
    if path is None:
        return
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise CLIError(f"cannot write {what} '{path}': no such directory '{d}'")


class _ConfigureGuard:
    """While the script runs, the command line's configuration is in force: a
    ``neuronsim.configure(...)`` in the script is ignored with one warning."""

    def __init__(self):
        import neuronsim
        from neuronsim import _api

        self._targets = [neuronsim, _api]
        self._saved = [m.configure for m in self._targets]
        self._warned = False

    def _ignored(self, *args, **kwargs):
        if not self._warned:
            print(
                "neuronsim run: ignoring neuronsim.configure(...) in the script; the command "
                "line (--preset/--set) configures the simulator",
                file=sys.stderr,
            )
            self._warned = True

    def __enter__(self):
        for m in self._targets:
            m.configure = self._ignored
        return self

    def __exit__(self, *exc):
        for m, f in zip(self._targets, self._saved, strict=False):
            m.configure = f


def _user_traceback(e: BaseException, script: str):
    """The traceback from the script's first frame on, as `python script.py` would show it."""
    tb = e.__traceback__
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != script:
        tb = tb.tb_next
    return tb if tb is not None else (None if isinstance(e, SyntaxError) else e.__traceback__)


def _run_script(script: str, script_args: list[str]) -> BaseException | None:
    saved_argv, saved_path0 = sys.argv, sys.path[0] if sys.path else None
    sys.argv = [script, *script_args]
    if sys.path:
        sys.path[0] = os.path.dirname(script)
    else:
        sys.path.insert(0, os.path.dirname(script))
    try:
        runpy.run_path(script, run_name="__main__")
        return None
    except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt included
        return e
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None:
            sys.path[0] = saved_path0
        sys.stdout.flush()


def _stats_busiest() -> tuple[str, float]:
    """Without a trace: the busiest engine from the device's statistics (no DMA queue union)."""
    import neuronsim

    device = neuronsim.simulated_time_ns()
    names = {"tensor": "TensorE", "vector": "VectorE", "scalar": "ScalarE", "gpsimd": "GpSimdE"}
    best, best_busy = "", 0.0
    for key, stat in neuronsim.device_stats().items():
        parts = key.split(".")
        if len(parts) != 3 or parts[2] != "busy_ps":
            continue
        engine = names.get(parts[1]) or (
            f"DMA {parts[1][3:]}" if parts[1].startswith("dma") else None
        )
        if engine and stat["value"] > best_busy:
            best, best_busy = f"{parts[0]} {engine}", stat["value"]
    return best, (best_busy / 1000 / device if device > 0 else 0.0)


def _report_line(summary: dict | None, config: dict) -> str:
    import neuronsim

    preset = config["preset"] + (" " + " ".join(config["overrides"]) if config["overrides"] else "")
    job = distributed_run.rank_and_world()
    who = f"rank {job[0]}: " if job else ""
    line = (
        f"neuronsim: {who}{preset}: simulated time {time_str(neuronsim.simulated_time_ns())} "
        f"(host {time_str(neuronsim.host_time_ns())})"
    )
    if summary is not None:
        if summary["bottleneck"]:
            util = pct(summary["bottleneck_utilisation"])
            line += f", bottleneck {summary['bottleneck']} ({util} busy)"
        line += (
            f", {summary['native_calls']} native op calls, "
            f"{summary['fallback_calls']} CPU fallbacks"
        )
    else:
        busiest, util = _stats_busiest()
        if busiest:
            line += f", busiest engine {busiest} ({pct(util)} busy)"
    return line


def run(args) -> int:
    if not args.script:
        raise CLIError(
            f"missing the script to run (neuronsim {args.command} [options] script.py [args])"
        )
    script = os.path.abspath(args.script)
    if not os.path.exists(script):
        raise CLIError(f"script '{args.script}' not found")
    if not os.path.isfile(script):
        raise CLIError(f"script '{args.script}' is not a file")
    for path, what in (
        (args.trace, "trace"),
        (args.report, "report"),
        (args.summary_json, "summary"),
    ):
        _writable(path, what)

    if args.nproc_per_node is not None:
        return distributed_run.launch(args, script)
    asked = distributed_run.rank_outputs(args) if distributed_run.rank_and_world() else None

    config = common.configure(args.preset, args.set)

    from neuronsim import tracing

    want_trace = bool(args.trace or args.report or args.summary_json)
    trace_path, temp_trace = args.trace, None
    if want_trace and not trace_path:
        fd, temp_trace = tempfile.mkstemp(prefix="neuronsim-run-", suffix=".json")
        os.close(fd)
        trace_path = temp_trace
    if want_trace:
        try:
            tracing.start(trace_path)
        except RuntimeError as e:
            if temp_trace:
                os.unlink(temp_trace)
            raise CLIError(str(e).splitlines()[0]) from None

    status = progress.Progress().start() if progress.enabled(args.progress) else None
    try:
        with _ConfigureGuard():
            error = _run_script(script, list(args.script_args))
    finally:
        if status:
            status.stop()

    summary, finish_error = None, None
    try:
        summary = _finish(args, script, error, trace_path if want_trace else None)
    except (RuntimeError, CLIError) as e:  # the device failed after the script (or a bad path)
        finish_error = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
    finally:
        if temp_trace and os.path.exists(temp_trace):
            os.unlink(temp_trace)

    print(_report_line(summary, config), file=sys.stderr)
    if asked is not None and not finish_error:
        try:
            distributed_run.finish_rank(asked, trace_path is not None and want_trace)
        except CLIError as e:
            finish_error = str(e)
    internal = asked is not None and distributed_run.launched_by_parent()
    for path, what in (
        (args.trace, "trace"),
        (args.report, "report"),
        (args.summary_json, "summary"),
    ):
        if path and not finish_error and not internal:  # a launching `run` merges rank traces
            print(f"neuronsim: {what} written to {path}", file=sys.stderr)

    if finish_error:
        print(f"neuronsim: error: {finish_error}", file=sys.stderr)
    if isinstance(error, SystemExit):
        raise error
    if error is None and finish_error:
        return 1
    if error is not None:
        traceback.print_exception(type(error), error, _user_traceback(error, script))
        return 130 if isinstance(error, KeyboardInterrupt) else 1
    return 0


def _finish(args, script: str, error: BaseException | None, trace_path: str | None) -> dict | None:
    """Waits for the device, closes the trace and writes the summary and report from it."""
    from neuronsim import _C, tracing

    if _C._is_initialized():
        _C._synchronize(0)
    if trace_path is None:
        return None
    argv = [args.script, *args.script_args]
    tracing.stop({"command": "neuronsim run", "script": script, "argv": argv})
    summary = trace_data.summarize(trace_data.load(trace_path))
    summary["trace"] = os.path.abspath(args.trace) if args.trace else None
    summary.update(_run_fields(args, script, error))
    if args.summary_json:
        write_file(args.summary_json, json.dumps(summary, indent=1, sort_keys=True) + "\n")
    if args.report:
        from neuronsim.cli import html_report

        html_report.write(args.report, summary)
    return summary


def _run_fields(args, script: str, error: BaseException | None) -> dict:
    import neuronsim

    if error is None:
        exit_code = 0
    elif isinstance(error, SystemExit):
        exit_code = error.code if isinstance(error.code, int) else (0 if error.code is None else 1)
    else:
        exit_code = 1
    return {
        "script": script,
        "argv": [args.script, *args.script_args],
        "exit_code": exit_code,
        "simulated_time_ns": neuronsim.simulated_time_ns(),
        "run_host_time_ns": neuronsim.host_time_ns(),
    }
