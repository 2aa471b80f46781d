"""The entries of TorchNeuron's ``torch_neuronx._C`` extension that user code and tests reach
for, where neuronsim has the concept (devices, logical cores, streams, generators, op tracking,
memory statistics, the platform). The rest (NRT copies and loads, NEFF compilation caches, the
runtime's counters, profiler mappings) raise an AttributeError saying neuronsim does not model
them, so ``hasattr`` answers False."""

from __future__ import annotations

import os

import torch
from neuronsim import _C as _sim
from neuronsim import device_module as _dm
from neuronsim._registration import register as _register

NeuronDeviceProperties = _dm.NeuronDeviceProperties
_NeuronStreamBase = torch.Stream
_NeuronEventBase = torch.Event

# TorchNeuron's platform table (PlatformUtils.cpp): instance family -> (target, default LNC).
_PLATFORMS = {
    "inf1": ("inf1", "1"),
    "trn1": ("trn1", "1"),
    "trn1n": ("trn1", "1"),
    "inf2": ("trn1", "1"),
    "trn2": ("trn2", "2"),
    "trn2n": ("trn2", "2"),
    "trn2u": ("trn2", "2"),
    "trn3": ("trn3", "2"),
    "trn3u": ("trn3", "2"),
}


def version() -> str:
    import torch_neuronx

    return torch_neuronx.__version__


def _register_device() -> None:
    _register()


def _register_profiler() -> None:
    """neuronsim's Kineto plugin registers with the device."""


def _set_python_ops_registered(registered: bool) -> None:
    """TorchNeuron's Python op registrations: neuronsim's kernels are registered in C++."""


def _is_neuron_runtime_initialized() -> bool:
    return _sim._is_initialized()


def _neuron_init() -> None:
    _sim._lazy_init()


def _neuron_getDeviceCount() -> int:  # noqa: N802 - TorchNeuron's name
    return _dm.device_count()


def _neuron_getCurrentDevice() -> int:  # noqa: N802
    return _dm.current_device()


def _neuron_setDevice(device_id: int) -> None:  # noqa: N802
    _dm.check_index(int(device_id))
    _sim._set_device(int(device_id))


def _neuron_getDeviceProperties(device_id: int) -> NeuronDeviceProperties:  # noqa: N802
    return _dm.properties(int(device_id))


def _neuron_synchronize(device_index: int = -1) -> None:
    if device_index < 0:
        _dm.synchronize()
    else:
        _dm.synchronize(device_index)


def _stream_triple(s: torch.Stream) -> tuple[int, int, int]:
    return s.stream_id, s.device_index, s.device_type


def _neuron_getCurrentStream(device_index: int = -1) -> tuple[int, int, int]:  # noqa: N802
    return _stream_triple(_dm.current_stream(None if device_index < 0 else device_index))


def _neuron_getDefaultStream(device_index: int = -1) -> tuple[int, int, int]:  # noqa: N802
    return _stream_triple(_dm.default_stream(None if device_index < 0 else device_index))


def _neuron_setStream(stream_id: int, device_index: int, device_type: int) -> None:  # noqa: N802
    _dm.set_stream(
        torch.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)
    )


def _get_default_generator(device_index: int = -1) -> torch.Generator:
    return _sim._default_generator(_dm.current_device() if device_index < 0 else device_index)


def _vnc_count() -> int:
    """Virtual NeuronCores (logical cores) visible to this process."""
    return _dm.device_count()


def _get_vnc_id(device_id: int) -> int:
    """The logical core (VNC) a device index maps to (NEURON_RT_VISIBLE_CORES)."""
    return int(_dm.properties(int(device_id)).logical_core)


def _get_instance_type() -> str:
    return _dm.properties(0).name


def _get_platform_target() -> str:
    family = _get_instance_type()
    if family not in _PLATFORMS:
        raise RuntimeError(
            f"Unknown instance type: {family}. Supported types: "
            "inf1, trn1, trn1n, inf2, trn2, trn2n, trn2u, trn3"
        )
    return _PLATFORMS[family][0]


def _get_logical_neuron_cores() -> str:
    """NEURON_LOGICAL_NC_CONFIG if set, else the logical core size of the simulated device."""
    env = os.environ.get("NEURON_LOGICAL_NC_CONFIG")
    if env:
        return env
    return str(_dm.properties(0).logical_core_size)


def _get_fallback_ops() -> list[str]:
    return sorted(_sim._fallback_ops())


def _get_executed_ops() -> list[str]:
    return sorted(_sim._executed_ops())


def _clear_op_tracking() -> None:
    _sim._clear_op_tracking()


def _log_executed_op(op_name: str) -> None:
    _sim._log_op(op_name, False)


def _log_offloaded_op(op_name: str) -> None:
    _sim._log_op(op_name, True)


def _get_memory_stats(device_index: int) -> dict:
    return _dm.torchneuron_memory_stats(_sim._memory_stats(int(device_index)))


def _reset_peak_memory_stats(device_index: int) -> None:
    _dm.reset_peak_memory_stats(int(device_index))


def _reset_accumulated_memory_stats(device_index: int) -> None:
    _dm.reset_accumulated_memory_stats(int(device_index))


class NeuronCachingAllocator:
    """The caching allocator's static entry TorchNeuron's ``empty_cache`` calls."""

    @staticmethod
    def emptyCache() -> None:  # noqa: N802
        _dm.empty_cache()


# Prefixes of TorchNeuron's runtime/compiler entries -> what they drive.
_NOT_MODELLED = {
    "_nrt_": "Neuron runtime (NRT) tensors, copies, loads and execution",
    "_get_nrt_": "Neuron runtime (NRT) tensors",
    "_get_compilation_cache": "the NEFF compilation cache",
    "_clear_compilation": "the NEFF compilation cache",
    "_get_all_cache_keys": "the NEFF compilation cache",
    "_log_neff_cache": "the NEFF compilation cache",
    "_neuron_counter": "the runtime's metric counters",
    "_neuron_metric": "the runtime's metrics",
    "_neuron_clear_": "the runtime's metrics",
    "_neuron_set_metrics": "the runtime's metrics",
    "_submit_xla_task": "the XLA execution pipeline",
    "_set_profiler_mapping": "NRT profiler mappings",
    "_get_profiler_mappings": "NRT profiler mappings",
    "_set_rank": "the Neuron runtime's collective setup",
    "_set_world_size": "the Neuron runtime's collective setup",
    "_set_local_": "the Neuron runtime's collective setup",
    "_reset_vnc_count": "the Neuron runtime's core discovery",
    "_neuron_close": "closing the Neuron runtime",
    "_set_python_contiguous_op": "TorchNeuron's lazy layout transformations",
    "compile_graph": "NEFF compilation of StableHLO graphs",
    "execute_compiled_graph": "NEFF execution",
    "put_neff_cache": "the NEFF compilation cache",
    "get_neff_": "the NEFF compilation cache",
}


def __getattr__(name: str):
    for prefix, what in _NOT_MODELLED.items():
        if name.startswith(prefix):
            raise AttributeError(
                f"torch_neuronx._C.{name} drives {what}, which neuronsim does not model"
            )
    raise AttributeError(f"module 'torch_neuronx._C' has no attribute {name!r}")
