"""neuronsim: an emulated AWS Trainium device for PyTorch.

``import neuronsim`` (or ``NEURON_SIM=1`` with ``import torch``) makes ``device="neuron"``
available: tensors live in simulated HBM, ops run on a simulated NeuronCore and report how long
they would take on trn1 or trn2.
"""

import torch

from neuronsim import _C
from neuronsim._registration import register as _register

_register()

from neuronsim._api import (  # noqa: E402
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
