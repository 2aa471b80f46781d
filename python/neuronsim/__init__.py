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


# Imported by torch's backend autoload: register nothing here. `_autoload` decides (only with
# NEURON_SIM=1) and turns a failure into a warning instead of breaking `import torch`.
_deferred = _torch_is_importing()
if not _deferred:
    _setup()
