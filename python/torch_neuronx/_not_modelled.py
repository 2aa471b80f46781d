"""TorchNeuron's internals that exist only to drive the Neuron compiler and runtime.

They are not faked: importing one raises ``NotModelledError`` (an ImportError) naming what the
module does in TorchNeuron and what neuronsim has instead.
"""

from __future__ import annotations

import importlib.abc
import sys

# submodule -> (what it is in TorchNeuron, what neuronsim offers instead)
INTERNALS = {
    "python_ops": (
        "its eager op implementations, lowered through torch-mlir/JAX/XLA to NEFFs",
        "neuronsim's native kernels run eager ops (neuronsim.op_report() lists them)",
    ),
    "kernels": (
        "its NEFF compilation, neuronx-cc wrapper and NEFF caches",
        "neuronsim builds device programs from its kernel library; there are no NEFFs",
    ),
    "neuron_dynamo_backend": (
        "its torch.compile backend (FX passes, StableHLO lowering, NEFF execution)",
        'torch.compile(backend="neuron") runs neuronsim\'s graph compiler; '
        "torch_neuronx.get_dynamo_metrics() reports its graphs",
    ),
    "metrics": (
        "counters of its NEFF compilation cache and the Neuron runtime",
        "neuronsim.op_report(), neuronsim.compile_stats() and neuronsim.device_stats()",
    ),
    "nki_kernel": (
        "the deprecated nki_jit path through neuronx-cc",
        "torch_neuronx.nki_op / wrap_nki",
    ),
    "nki_hop": (
        "its NKI higher-order op (kernel registry, NEFF per kernel)",
        "torch_neuronx.nki_op / wrap_nki",
    ),
    "type_converter_base": ("its dtype mapping to XLA/NEFF types", "torch_neuronx.utils"),
    "protos": ("HLO protocol buffers", "nothing: there is no HLO"),
    "_build_config": ("the wheel's build-time defaults", "torch_neuronx._environment"),
}


class NotModelledError(ImportError):
    """A TorchNeuron internal that neuronsim does not model."""


def message(submodule: str) -> str:
    what, instead = INTERNALS[submodule]
    return (
        f"torch_neuronx.{submodule} is TorchNeuron's {what}: it drives the Neuron compiler and "
        f"runtime, which neuronsim does not model ({instead})"
    )


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        parts = name.split(".")
        if len(parts) >= 2 and parts[0] == "torch_neuronx" and parts[1] in INTERNALS:
            raise NotModelledError(message(parts[1]), name=name)
        return None


def install() -> None:
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
