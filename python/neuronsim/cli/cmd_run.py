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
from neuronsim.cli.formatting import time_str

EXAMPLES = """\
It ends with where the simulated time went: kernels, launch overhead, copies, CPU fallbacks,
collectives (the parts add up to the run) and each engine's busy time.

examples:
  neuronsim run train.py --epochs 1                 arguments after the script go to it
  neuronsim run --trace out.json train.py           then: neuronsim report out.json
  neuronsim run --preset trn2 --set hbm.bandwidth_gbps=1450 train.py
  neuronsim run --nproc-per-node 2 --trace ddp.json ddp_train.py
  neuronsim run --record run.nsrun train.py         then: neuronsim replay run.nsrun --set ..."""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "run",
        help="run a script on the simulated device",
        description=__doc__.split("``: ")[1].split("\n\n")[0],
        epilog=EXAMPLES,
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
        "--record",
        metavar="OUT.nsrun",
        help="keep the programs the run launched and its host's calls, to re-time them under "
        "other presets (neuronsim replay) without running the script again",
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
        help="status line on stderr every second (default auto: when stderr is a terminal)",
    )
    p.add_argument("script", help="the Python script to run")
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


def _report_lines(summary: dict | None, config: dict) -> list[str]:
    """The run's closing lines: its clocks and op counts, then where the time went (from the
    trace's summary when there is one, else from the runtime: the same numbers)."""
    import neuronsim
    from neuronsim.cli import time_report

    preset = config["preset"] + (" " + " ".join(config["overrides"]) if config["overrides"] else "")
    job = distributed_run.rank_and_world()
    who = f"rank {job[0]}: " if job else ""
    line = (
        f"neuronsim: {who}{preset}: simulated time {time_str(neuronsim.simulated_time_ns())} "
        f"(host {time_str(neuronsim.host_time_ns())})"
    )
    if summary is not None:
        native, fallback = summary["native_calls"], summary["fallback_calls"]
        rep = time_report.from_summary(summary)
    else:
        counts = neuronsim.op_report().values()
        native = sum(c.get("native", 0) for c in counts)
        fallback = sum(c.get("fallback", 0) for c in counts)
        rep = time_report.from_runtime() if neuronsim._C._is_initialized() else None
    line += f", {native} native op calls, {fallback} CPU fallbacks"
    if rep is None:
        return [line]
    return [line, *(f"neuronsim: {who}{x}" for x in time_report.closing_lines(rep))]


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
        (args.record, "run log"),
    ):
        _writable(path, what)
    if args.record and (args.nproc_per_node is not None or distributed_run.rank_and_world()):
        raise CLIError(
            "--record: a distributed run cannot be re-timed alone (its ranks' clocks meet)"
        )

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

    if args.record:
        from neuronsim import _C

        _C._lazy_init()
        _C._run_log_start()
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

    for line in _report_lines(summary, config):
        print(line, file=sys.stderr)
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
        (args.record, "run log"),
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
    run_log = _C._run_log_stop(args.record) if args.record else None
    if trace_path is None:
        return None
    argv = [args.script, *args.script_args]
    tracing.stop({"command": "neuronsim run", "script": script, "argv": argv})
    summary = trace_data.summarize(trace_data.load(trace_path))
    summary["trace"] = os.path.abspath(args.trace) if args.trace else None
    summary.update(_run_fields(args, script, error))
    if run_log is not None:  # what `whatif --sensitivity` needs to know of the record
        summary["run_log"] = dict(run_log, path=os.path.abspath(args.record))
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
