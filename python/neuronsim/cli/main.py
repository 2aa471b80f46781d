"""``neuronsim``: the command line (console script ``neuronsim``, or ``python -m neuronsim``).

Help and usage errors never import torch: the subcommands import what they use when they run.
"""

from __future__ import annotations

import argparse
import sys

from neuronsim.cli import (
    cmd_diff,
    cmd_ls,
    cmd_nki,
    cmd_presets,
    cmd_replay,
    cmd_report,
    cmd_run,
    cmd_whatif,
)
from neuronsim.cli.errors import CLIError

COMMANDS = (cmd_run, cmd_whatif, cmd_report, cmd_diff, cmd_replay, cmd_ls, cmd_presets, cmd_nki)

EXAMPLES = """\
examples:
  neuronsim run --trace out.json train.py         run a script, record a trace
  neuronsim report out.json --html report.html    where the time went, as text and a page
  neuronsim whatif --sensitivity train.py         which hardware parameter would help most
  neuronsim whatif --sweep hbm.bandwidth_gbps=410:1640:x2 --plot sweep.png train.py
  neuronsim presets show trn2                     every parameter with its value and source

`neuronsim COMMAND --help` describes a command, with examples."""


class Parser(argparse.ArgumentParser):
    """Usage errors are one line (``neuronsim: error: ...``) like every other error."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # noqa: D102
        raise CLIError(f"{message} (see '{self.prog} --help')")


def version() -> str:
    from importlib import metadata

    try:
        return metadata.version("neuronsim")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "unknown (not installed)"


class _Version(argparse.Action):
    """--version, its value read only when asked for."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"neuronsim {version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="neuronsim",
        description="Run PyTorch scripts on the simulated Trainium device, see where the "
        "simulated time went,\nand explore what-if hardware configurations.",
        epilog=EXAMPLES,
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for cmd in COMMANDS:
        cmd.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return args.func(args) or 0
    except CLIError as e:
        print(f"neuronsim: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("neuronsim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `neuronsim report x.json | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
