"""neuronsim's stand-in for TorchNeuron's ``torch_neuronx`` package.

Code and tests written for Trainium start with ``import torch_neuronx`` and call its API; libraries
look for the package to decide that a Neuron device is present (accelerate's
``is_neuron_available``, transformers' ``is_torch_neuron_available``). With neuronsim installed,
this import registers the simulated ``neuron`` device and the ``neuron`` c10d backend and gives
TorchNeuron's public surface (names, signatures, return types and errors, from TorchNeuron's
public source): the functions below, the submodules ``neuron``, ``memory``, ``streams``,
``profiling``, ``distributed`` and ``utils``, and the ``_C`` entries tests reach for. Internals
that only drive the Neuron compiler and runtime (NEFF caches, NRT copies, StableHLO lowering) are
not faked: importing them raises an ImportError saying so. docs/torch_neuronx.md lists what is
modelled and how TorchNeuron's environment variables act.
"""

from neuronsim import _coexistence

_conflict = _coexistence.conflict()
if _conflict is not None:
    raise ImportError(f"torch_neuronx (neuronsim's stand-in): {_conflict}")

from torch_neuronx import _environment  # noqa: E402

_environment.apply_defaults()

import os  # noqa: E402
import threading  # noqa: E402
from importlib import metadata as _metadata  # noqa: E402

import neuronsim  # noqa: E402,F401  (registers the neuron device and c10d backend)
import torch  # noqa: E402

from torch_neuronx import _C, _not_modelled  # noqa: E402

_not_modelled.install()


def _version() -> str:
    try:
        return _metadata.version("neuronsim")
    except _metadata.PackageNotFoundError:
        return "0.0.0"


# The stand-in's version: neuronsim's, marked as the stand-in (a PEP 440 local label).
__version__ = f"{_version()}+neuronsim"

# TorchNeuron keeps the real torch.device class before test frameworks patch it.
_real_torch_device = torch.device

from torch_neuronx import distributed, memory, neuron, profiling, streams, utils  # noqa: E402
from torch_neuronx._dynamo_metrics import get_dynamo_metrics, reset_dynamo_metrics  # noqa: E402
from torch_neuronx.memory import (  # noqa: E402
    max_memory_allocated,
    max_memory_reserved,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
)
from torch_neuronx.profiling import NeuronProfiler  # noqa: E402
from torch_neuronx.streams import Event, Stream  # noqa: E402

_dm = neuron
device = _dm.device
StreamContext = _dm.StreamContext

_initialization_lock = threading.RLock()


def _autoload() -> None:
    """TorchNeuron's ``torch.backends`` entry point: importing the package registers the
    device (neuronsim registers its own entry point, active with ``NEURON_SIM=1``)."""


def __getattr__(name: str):
    # Module state TorchNeuron keeps as globals, read live.
    if name == "_initialized":
        return _C._is_neuron_runtime_initialized()
    if name == "_is_in_bad_fork":
        return _dm._is_in_bad_fork()
    if name == "_original_pid":
        return os.getpid() if _C._is_neuron_runtime_initialized() else 0
    # NKI kernels in PyTorch programs: neuronsim's NKI front end provides them.
    if name in ("nki_op", "wrap_nki"):
        return _nki(name)
    if name in _not_modelled.INTERNALS:
        raise AttributeError(_not_modelled.message(name))
    raise AttributeError(f"module 'torch_neuronx' has no attribute {name!r}")


def _nki(name: str):
    try:
        from neuronsim.nki import torch_ops
    except ImportError as e:
        raise AttributeError(
            f"torch_neuronx.{name}: NKI kernels called from PyTorch are not available in this "
            f"neuronsim build (neuronsim.nki.torch_ops could not be imported: {e})"
        ) from None
    return getattr(torch_ops, name)


def _lazy_init() -> None:
    """Initialize the device (the simulated runtime) if not already initialized."""
    if _dm._is_in_bad_fork():
        raise RuntimeError(
            "Cannot re-initialize Neuron runtime in forked subprocess. "
            "To use Neuron with multiprocessing, use the 'spawn' start method"
        )
    _C._neuron_init()


def _after_fork(arg=None) -> None:
    """TorchNeuron's fork handler; neuronsim's own marks the child (see ``_is_in_bad_fork``)."""


def is_neuron_runtime_initialized() -> bool:
    return _C._is_neuron_runtime_initialized()


def device_count() -> int:
    """Return the number of Neuron devices (Virtual Neuron Cores) available."""
    return _C._neuron_getDeviceCount()


def current_device() -> int:
    """Return the current Neuron device index."""
    return _C._neuron_getCurrentDevice()


def set_device(device: int) -> None:
    """Set the current Neuron device (an invalid id is a ValueError, and a RuntimeError)."""
    _dm.check_index(device)
    _C._neuron_setDevice(device)


def get_device_properties(device):
    """The properties of a Neuron device (an index or a string such as ``"neuron:0"``): ``name``
    (the instance family, ``"trn1"``) and ``total_memory`` (bytes)."""
    if isinstance(device, str) and "neuron" in device:
        device_obj = torch.device(device)
        if device_obj.type != "neuron":
            raise ValueError(f"Expected neuron device, got {device_obj.type}")
        device_id = device_obj.index if device_obj.index is not None else 0
    else:
        device_id = int(device)
    if device_id < 0 or device_id >= device_count():
        raise _dm.InvalidDeviceIndexError(f"Invalid device id: {device_id}")
    _lazy_init()
    return _C._neuron_getDeviceProperties(device_id)


def empty_cache() -> None:
    """Releases all cached memory blocks in the caching allocator."""
    _dm.empty_cache()


def get_fallback_ops() -> list:
    """Operations (``"aten::op.overload"``) that fell back to CPU since the last clear."""
    return _C._get_fallback_ops()


def get_executed_ops() -> list:
    """Operations that executed on the Neuron device since the last clear."""
    return _C._get_executed_ops()


def clear_op_tracking() -> None:
    """Clear both fallback and executed operation tracking."""
    _C._clear_op_tracking()


def _get_device_index(device, optional=False, allow_cpu=False):
    """Get device index from device specification."""
    if device is None:
        return None if optional else current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, _real_torch_device):
        if device.type != "neuron":
            raise ValueError(f"Expected neuron device, got {device.type}")
        return device.index if device.index is not None else current_device()
    if isinstance(device, int):
        return device
    raise ValueError(f"Invalid device specification: {device}")


def synchronize(device=None) -> None:
    """Wait for all kernels in all streams on a Neuron device to complete."""
    index = _get_device_index(device, optional=True)
    _C._neuron_synchronize(-1 if index is None else index)


def current_stream(device=None) -> Stream:
    """Return the currently selected Stream for a given device."""
    return _dm.current_stream(device)


def default_stream(device=None) -> Stream:
    """Return the default Stream for a given device."""
    return _dm.default_stream(device)


def set_stream(stream: Stream) -> None:
    """Set the current stream."""
    if stream is None:
        return
    _dm.set_stream(stream)


def stream(stream) -> StreamContext:
    """Wrap around the Context-manager StreamContext that selects a given stream."""
    return StreamContext(stream)


__all__ = [
    "Event",
    "NeuronProfiler",
    "Stream",
    "StreamContext",
    "__version__",
    "clear_op_tracking",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "distributed",
    "empty_cache",
    "get_device_properties",
    "get_dynamo_metrics",
    "get_executed_ops",
    "get_fallback_ops",
    "is_neuron_runtime_initialized",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "memory_summary",
    "neuron",
    "nki_op",
    "profiling",
    "reset_accumulated_memory_stats",
    "reset_dynamo_metrics",
    "reset_peak_memory_stats",
    "set_device",
    "set_stream",
    "stream",
    "streams",
    "synchronize",
    "utils",
    "wrap_nki",
]

# Set last: torch.neuron delegates to this module's functions once they all exist.
_is_loaded = True
