"""The runs behind `neuronsim whatif`: one `neuronsim run --summary-json` (or `neuronsim replay`)
subprocess per point, in parallel (each simulated device is configured once per process), the
stock preset's values of the swept keys, and a failed run's file, line and reproducing command.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from neuronsim.cli import common, presets, progress, trace_data
from neuronsim.cli.errors import CLIError


@dataclass
class Point:
    """One run: the parameters it sets, how it runs, where its summary goes."""

    values: dict[str, str]
    summary_path: str
    replay_log: str | None = None  # re-time this run log instead of running the script
    label: str = ""
    record: str | None = None  # the run also keeps its run log here (neuronsim run --record)
    scale: str = ""  # a sensitivity point's factor ("0.5x")
    result: dict = field(default_factory=dict)
    error: str = ""  # why the run failed (run_points(..., tolerate=True))


def stock_values(preset: str | None, sets: list[str], keys: list[str]) -> dict[str, str]:
    """The value each key has without the sweep: the preset's (NEURON_SIM_PRESET, else trn1),
    with NEURON_SIM_SET and --set applied. Unknown keys are left out (configure names them)."""
    env = common.environment_config()
    name = preset or env["preset"]
    params = {k: p["value"] for k, p in presets.parameters(presets.load(name))}
    for item in [*env["overrides"], *sets]:
        k, _, v = item.partition("=")
        params[k.strip()] = v.strip()
    return {k: _text(params[k]) for k in keys if k in params}


def _text(value) -> str:
    """A preset value as a sweep writes it: 410.0 -> '410'."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def same_value(a: str, b: str) -> bool:
    try:
        return float(a) == float(b)
    except ValueError:
        return a.strip() == b.strip()


def _slug(values: dict[str, str]) -> str:
    text = ",".join(f"{k}={v}" for k, v in values.items()) or "stock"
    return re.sub(r"[^A-Za-z0-9._=+,-]+", "-", text)


def point_path(out_dir: str, i: int, values: dict[str, str]) -> str:
    return os.path.join(out_dir, f"{i:03d}_{_slug(values)}.json")


def run_command(args, values: dict[str, str]) -> list[str]:
    """`neuronsim run` with the point's parameters, as a user would type it."""
    cmd = ["neuronsim", "run"]
    if args.preset:
        cmd += ["--preset", args.preset]
    if getattr(args, "nproc_per_node", None):
        cmd += ["--nproc-per-node", str(args.nproc_per_node)]
    for s in [*args.set, *(f"{k}={v}" for k, v in values.items())]:
        cmd += ["--set", s]
    return [*cmd, args.script, *args.script_args]


def _child_command(args, point: Point) -> list[str]:
    base = [sys.executable, "-m", "neuronsim"]
    sets = [*args.set, *(f"{k}={v}" for k, v in point.values.items())]
    if point.replay_log:
        cmd = [*base, "replay", point.replay_log, "--summary-json", point.summary_path]
        if args.preset:
            cmd += ["--preset", args.preset]
        for s in sets:
            cmd += ["--set", s]
        return cmd
    cmd = [*base, "run", "--progress", "never", "--summary-json", point.summary_path]
    if point.record:
        cmd += ["--record", point.record]
    if args.preset:
        cmd += ["--preset", args.preset]
    if getattr(args, "nproc_per_node", None):
        cmd += ["--nproc-per-node", str(args.nproc_per_node)]
    for s in sets:
        cmd += ["--set", s]
    return [*cmd, args.script, *args.script_args]


_FRAME = re.compile(r'^\s*File "(.+)", line (\d+), in (.+)$')


def failure(stderr: str, script: str) -> str:
    """A failed run in one line: where in the script (file:line) and what, from its traceback;
    else its last error line."""
    lines = stderr.splitlines()
    errors = [ln for ln in lines if ln.startswith("neuronsim: error:")]
    frames = [(m[1], m[2]) for ln in lines if (m := _FRAME.match(ln))]
    where = ""
    if frames:
        mine = [f for f in frames if os.path.abspath(f[0]) == os.path.abspath(script)]
        path, line = (mine or frames)[-1]
        where = f"{os.path.relpath(path) if not path.startswith('<') else path}:{line}: "
    rest = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("neuronsim: ")]
    tail = [ln for ln in rest if not ln.startswith(("File ", "Traceback", "^", "~"))]
    if frames and tail:
        return where + tail[-1]
    if errors:
        return errors[-1][len("neuronsim: error: ") :]
    return (rest[-1] if rest else "no output")[:300]


def run_points(args, points: list[Point], what: str = "runs", tolerate: bool = False) -> None:
    """Runs every point (args.jobs at a time); a failure is a CLIError naming the point, where
    the script failed and the command that reproduces it (with `tolerate`: the point's
    `error`)."""
    status = progress.enabled("auto")
    done, lock = [0], threading.Lock()
    script = os.path.abspath(args.script)

    def one(p: Point) -> None:
        proc = subprocess.run(_child_command(args, p), capture_output=True, text=True)
        with lock:
            done[0] += 1
            if status:
                sys.stderr.write(f"\rneuronsim whatif: {done[0]}/{len(points)} {what} done")
                sys.stderr.flush()
        if proc.returncode != 0 or not os.path.exists(p.summary_path):
            values = ", ".join(f"{k}={v}" for k, v in p.values.items()) or "the stock preset"
            how = "re-timing" if p.replay_log else "the run"
            repro = shlex.join(run_command(args, p.values))
            p.error = f"{failure(proc.stderr, script)} (reproduce: {repro})"
            if tolerate:
                return
            raise CLIError(
                f"{how} with {values} failed (exit code {proc.returncode}): {p.error}",
                exit_code=1,
            )
        p.result = trace_data.load_summary(p.summary_path)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for f in [pool.submit(one, p) for p in points]:
            f.result()
    if status:
        sys.stderr.write("\n")
