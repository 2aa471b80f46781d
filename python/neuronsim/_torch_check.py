"""The torch version check run before ``neuronsim._C`` loads.

The extension links libtorch, so it runs only with the torch it was built against (recorded at
build time in ``_build_info.py``). Another torch would fail inside the dynamic loader with a
missing-symbol traceback; this names both versions and the two ways out instead.
"""

from __future__ import annotations

import sys


class TorchVersionError(ImportError):
    """The installed torch is not the one ``neuronsim._C`` was built against."""


def _public(version: str) -> str:
    # "2.13.0+cpu" and "2.13.0" are the same release and the same C++ API.
    return version.split("+", 1)[0]


def mismatch(built: str, installed: str) -> str | None:
    """The error message when ``installed`` cannot load an extension built against ``built``."""
    if _public(built) == _public(installed):
        return None
    return (
        f"neuronsim was built against torch {built}, but torch {installed} is installed: "
        f"install torch=={_public(built)} (pip install torch=={_public(built)}), or rebuild "
        f"neuronsim against this torch (pip install --no-build-isolation . in its source tree)"
    )


def _one_line_if_uncaught(previous):
    def hook(exc_type, exc, tb):
        if issubclass(exc_type, TorchVersionError):
            print(f"neuronsim: error: {exc}", file=sys.stderr)
        else:
            previous(exc_type, exc, tb)

    return hook


def check_torch_version(installed: str) -> None:
    """Raises TorchVersionError on a mismatch; uncaught, it prints as one line, not a traceback."""
    try:
        from neuronsim._build_info import TORCH_VERSION
    except ImportError:
        return  # a source tree without a built extension: importing _C says so
    message = mismatch(TORCH_VERSION, installed)
    if message is None:
        return
    if not getattr(sys.excepthook, "_neuronsim", False):
        sys.excepthook = _one_line_if_uncaught(sys.excepthook)
        sys.excepthook._neuronsim = True
    raise TorchVersionError(message)
