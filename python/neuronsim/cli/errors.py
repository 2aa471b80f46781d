"""The CLI's one error type: a message printed as one line, ``neuronsim: error: ...``."""

from __future__ import annotations


class CLIError(Exception):
    """Bad input (arguments, files, configuration): one line on stderr, non-zero exit."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(" ".join(str(message).split()))  # always one line
        self.exit_code = exit_code


def write_file(path: str, data: str | bytes) -> None:
    """Writes an output file; failure is a CLIError naming it."""
    raw = data if isinstance(data, bytes) else data.encode("utf-8")
    try:
        with open(path, "wb") as f:
            f.write(raw)
    except OSError as e:
        raise CLIError(f"cannot write '{path}': {e.strerror or e}") from None
