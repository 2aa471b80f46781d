"""neuronsim: an emulated AWS Trainium device for PyTorch.

``import neuronsim`` (or ``NEURON_SIM=1`` with ``import torch``) makes ``device="neuron"``
available: tensors live in simulated HBM, ops run on a simulated NeuronCore and report how long
they would take on trn1 or trn2.
"""

import sys as _sys

__all__ = [
    "clear_op_tracking",
    "compile_stats",
    "configure",
    "device_stats",
    "get_executed_ops",
    "get_fallback_ops",
    "host_time_ns",
    "op_report",
    "simulated_time_ns",
    "torch",
    "_C",
]


def _torch_is_importing() -> bool:
    """True while ``import torch`` itself runs: its backend autoload imports
    ``neuronsim._autoload`` and, with it, this package."""
    spec = getattr(_sys.modules.get("torch"), "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


def _setup() -> None:
    """Loads the extension and registers the ``neuron`` device."""
    global torch, _C  # noqa: PLW0603
    global clear_op_tracking, compile_stats, configure, device_stats, get_executed_ops
    global get_fallback_ops, host_time_ns, op_report, simulated_time_ns
    import torch

    from neuronsim._torch_check import check_torch_version

    check_torch_version(torch.__version__)
    from neuronsim import _C
    from neuronsim._registration import register

    register()

    from neuronsim._api import (
        clear_op_tracking,
        compile_stats,
        configure,
        device_stats,
        get_executed_ops,
        get_fallback_ops,
        host_time_ns,
        op_report,
        simulated_time_ns,
    )


def _command_line_starting() -> bool:
    """True while the ``neuronsim`` command starts (its console script, or ``python -m
    neuronsim``): it sets the device up (and imports torch) only for the subcommands that use
    it, so ``--help`` and argument errors answer at once."""
    import os

    argv = list(getattr(_sys, "orig_argv", []))
    if "-m" in argv[:-1]:  # python [options] -m neuronsim ...: the module run is this package
        return argv[argv.index("-m") + 1] in ("neuronsim", "neuronsim.cli.main")
    script = _sys.argv[0] if _sys.argv else ""
    return os.path.basename(script) == "neuronsim" and not script.endswith(".py")


# Imported by torch's backend autoload: register nothing here. `_autoload` decides (only with
# NEURON_SIM=1) and turns a failure into a warning instead of breaking `import torch`.
_deferred = _torch_is_importing()
# The command line: set up on the first use of the package's API (`__getattr__` below).
_on_first_use = not _deferred and _command_line_starting()
if not _deferred and not _on_first_use:
    _setup()


def __getattr__(name: str):
    global _on_first_use  # noqa: PLW0603
    if _on_first_use and name in __all__:
        _on_first_use = False
        _setup()
        return globals()[name]
    raise AttributeError(f"module 'neuronsim' has no attribute '{name}'")
