"""The command line as users expect it (issue 29): --version, help and argument errors without
importing torch, examples in every subcommand's help, the script shown as required, every preset
listed, defaults stated, and a near miss of a preset name answered with the nearest one."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO
from neuronsim.cli.main import COMMANDS, build_parser, main

CONSOLE_SCRIPT = Path(sys.executable).parent / "neuronsim"
SUBCOMMANDS = ("run", "whatif", "report", "diff", "replay", "ls", "presets", "nki")


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith("NEURON")}


def in_process(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


def _imports(argv: list[str], console: bool = False) -> tuple[subprocess.CompletedProcess, float]:
    """Runs the command with -X importtime; returns it and its wall time."""
    cmd = [sys.executable, "-X", "importtime"]
    cmd += [str(CONSOLE_SCRIPT)] if console else ["-m", "neuronsim"]
    t0 = time.monotonic()
    p = subprocess.run([*cmd, *argv], capture_output=True, text=True, env=_env(), cwd=REPO)
    return p, time.monotonic() - t0


def _imported(stderr: str) -> set[str]:
    mods = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            mods.add(line.rsplit("|", 1)[1].strip())
    return mods


@pytest.mark.parametrize(
    "argv,code",
    [
        (["--help"], 0),
        (["run", "--help"], 0),
        (["whatif", "--help"], 0),
        (["report", "--help"], 0),
        (["run"], 2),  # the script is missing
        (["whatif", "--sweep", "hbm.bandwidth_gbps", "x.py"], 2),
        (["report", "missing.json"], 2),
        (["bogus"], 2),
    ],
)
def test_help_and_argument_errors_do_not_import_torch(argv, code):
    p, seconds = _imports(argv, console=argv == ["--help"])
    assert p.returncode == code, p.stderr[-2000:]
    mods = _imported(p.stderr)
    assert "neuronsim.cli.main" in mods  # importtime worked
    assert not {m for m in mods if m == "torch" or m.startswith("torch.")}, argv
    assert "neuronsim._C" not in mods
    print(f"{' '.join(argv)}: {seconds:.2f} s wall")


def test_version():
    from importlib import metadata

    code, out, _ = in_process("--version")
    assert code == 0 and out.strip() == f"neuronsim {metadata.version('neuronsim')}"


def test_every_subcommand_has_examples_and_states_its_defaults():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == set(SUBCOMMANDS) and len(COMMANDS) == len(SUBCOMMANDS)
    assert "examples:" in parser.format_help()
    for name, p in sub.choices.items():
        text = p.format_help()
        assert "example" in text, name
        for action in p._actions:
            if action.default not in (None, False, [], "==SUPPRESS==") and action.help:
                assert "default" in action.help, (name, action.dest)


def test_the_script_is_shown_as_required():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in ("run", "whatif"):
        usage = sub.choices[name].format_usage()
        assert " script " in usage and "[script]" not in usage, usage


def test_preset_option_lists_every_preset():
    from neuronsim._build_info import PRESETS
    from neuronsim.cli import presets

    assert set(PRESETS) == set(presets._extension()._preset_names())
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    text = " ".join(sub.choices["run"].format_help().split())
    for name in PRESETS:
        assert name in text
    presets_help = sub.choices["presets"].format_help()
    assert (
        "list    the built-in presets" in presets_help and "show    every parameter" in presets_help
    )


def test_unknown_preset_suggests_the_nearest_name():
    code, _, err = in_process("presets", "show", "trn7")
    assert code == 2
    assert "unknown preset 'trn7' (did you mean 'trn1'?)" in err, err
    code, _, err = in_process("presets", "show", "h100")
    assert code == 2 and "did you mean" not in err
