"""``neuronsim``: the command line (console script ``neuronsim``, or ``python -m neuronsim``)."""

from __future__ import annotations

import argparse
import sys

from neuronsim.cli import cmd_diff, cmd_ls, cmd_nki, cmd_presets, cmd_report, cmd_run, cmd_whatif
from neuronsim.cli.errors import CLIError

COMMANDS = (cmd_run, cmd_whatif, cmd_report, cmd_diff, cmd_ls, cmd_presets, cmd_nki)


class Parser(argparse.ArgumentParser):
    """Usage errors are one line (``neuronsim: error: ...``) like every other error."""

    def error(self, message: str):  # noqa: D102
        raise CLIError(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="neuronsim",
        description="Run PyTorch scripts on the simulated Trainium device, profile them and "
        "explore what-if hardware configurations.",
    )
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
