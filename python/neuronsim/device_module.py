"""``torch.neuron``: the device module, with the names CUDA and TorchNeuron users know.

Times reported here (``Event.elapsed_time``) are simulated milliseconds.
"""

from __future__ import annotations

import json
from typing import Any

import torch

from neuronsim import _C

__all__ = [
    "Event",
    "Stream",
    "StreamContext",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "empty_cache",
    "get_amp_supported_dtype",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_rng_state",
    "get_rng_state_all",
    "initial_seed",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_stats_as_nested_dict",
    "memory_summary",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_device",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "stream",
    "synchronize",
]


def _index(device: Any = None) -> int:
    """The index of a device given as torch.cuda's functions take it: None (the current device),
    an int, a string ("neuron", "neuron:1") or a torch.device."""
    if device is None:
        return current_device()
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    if isinstance(device, str):
        try:
            device = torch.device(device)
        except RuntimeError:
            raise ValueError(
                f"invalid device string {device!r}: expected a neuron device such as 'neuron' "
                "or 'neuron:0'"
            ) from None
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"expected a neuron device, got {device}")
        return current_device() if device.index is None else device.index
    raise TypeError(f"invalid device {device!r}: expected an int, a str or a torch.device")


# ---- availability and selection ----
def is_available() -> bool:
    return _C._device_count_noexcept() > 0


def device_count() -> int:
    return _C._device_count_noexcept()


def is_initialized() -> bool:
    return _C._is_initialized()


def init() -> None:
    _C._lazy_init()


def _lazy_init() -> None:
    _C._lazy_init()


def _is_in_bad_fork() -> bool:
    return _C._is_in_bad_fork()


def current_device() -> int:
    return _C._current_device()


def set_device(device: Any) -> None:
    idx = _index(device)
    if idx >= 0:
        _C._set_device(idx)


class device:
    """Context manager that changes the current neuron device."""

    def __init__(self, device: Any):
        self.idx = -1 if device is None else _index(device)
        self.prev = -1

    def __enter__(self):
        self.prev = current_device()
        if self.idx >= 0 and self.idx != self.prev:
            _C._set_device(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0 and self.idx != self.prev:
            _C._set_device(self.prev)
        return False


def synchronize(device: Any = None) -> None:
    _C._synchronize(_index(device))


def get_device_name(device: Any = None) -> str:
    return _C._device_name(_index(device))


class _DeviceProperties:
    def __init__(self, d: dict):
        self.__dict__.update(d)

    def __repr__(self) -> str:
        return f"_NeuronDeviceProperties(name='{self.name}', total_memory={self.total_memory})"


def get_device_properties(device: Any = None) -> _DeviceProperties:
    return _DeviceProperties(_C._device_properties(_index(device)))


def get_device_capability(device: Any = None) -> tuple[int, int]:
    """(major, minor) of the NeuronCore generation the preset models: (2, 0) for NeuronCore-v2
    (trn1), (3, 0) for NeuronCore-v3 (trn2)."""
    preset = json.loads(_C._preset_text(get_device_properties(device).preset))
    generation = preset["preset"]["generation"]  # "NeuronCore-v2"
    return int(generation.rsplit("-v", 1)[1]), 0


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


# ---- streams and events (timestamps are simulated time) ----
class Stream(torch.Stream):
    def __new__(cls, device: Any = None, priority: int = 0, **kwargs):
        idx = _index(device)
        return super().__new__(cls, device=torch.device("neuron", idx), priority=priority, **kwargs)


class _EventMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, torch.Event) and obj.device.type == "neuron"


class Event(metaclass=_EventMeta):
    """``torch.neuron.Event(...)`` is a ``torch.Event`` on the current neuron device.

    It is not a subclass instance: torch's C++ ``Event.elapsed_time`` and ``Stream.record_event``
    accept exactly ``torch.Event`` objects, so a subclass instance could not be passed to them.
    """

    def __new__(
        cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ):
        return torch.Event(
            device=torch.device("neuron", current_device()),
            enable_timing=enable_timing,
            blocking=blocking,
            interprocess=interprocess,
        )


def current_stream(device: Any = None) -> torch.Stream:
    return torch.accelerator.current_stream(_index(device))


_PRIVATEUSE1 = 20  # c10::DeviceType::PrivateUse1


def default_stream(device: Any = None) -> torch.Stream:
    return torch.Stream(stream_id=0, device_index=_index(device), device_type=_PRIVATEUSE1)


def set_stream(s: torch.Stream) -> None:
    torch.accelerator.set_stream(s)


class StreamContext:
    """Makes a stream current (and its device) inside a with block, as torch.cuda.StreamContext;
    None does nothing."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream
        self._prev: tuple[int, torch.Stream] | None = None

    def __enter__(self):
        if self.stream is None:
            return self.stream
        self._prev = (current_device(), current_stream(self.stream.device_index))
        set_stream(self.stream)  # also makes the stream's device current
        return self.stream

    def __exit__(self, *exc):
        if self._prev is not None:
            prev_device, prev = self._prev
            set_stream(prev)
            _C._set_device(prev_device)
            self._prev = None
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    return StreamContext(stream)


# ---- memory ----
def memory_stats(device: Any = None) -> dict[str, Any]:
    return dict(sorted(_C._memory_stats(_index(device)).items()))


def memory_stats_as_nested_dict(device: Any = None) -> dict[str, Any]:
    """memory_stats() nested at its dots, as torch.cuda.memory_stats_as_nested_dict."""
    nested: dict[str, Any] = {}
    for key, value in memory_stats(device).items():
        *path, leaf = key.split(".")
        d = nested
        for part in path:
            d = d.setdefault(part, {})
        d[leaf] = value
    return nested


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A table of the allocator's statistics (current, peak, allocated and freed totals), as
    torch.cuda.memory_summary prints; abbreviated leaves out the per-pool rows."""
    stats = memory_stats(device)
    rows = [
        ("Allocated memory", "allocated_bytes", True),
        ("Active memory", "active_bytes", True),
        ("Requested memory", "requested_bytes", True),
        ("Reserved memory", "reserved_bytes", True),
        ("Non-releasable memory", "inactive_split_bytes", True),
        ("Allocations", "allocation", False),
        ("Active allocs", "active", False),
        ("Reserved segments", "segment", False),
        ("Non-releasable allocs", "inactive_split", False),
    ]
    pools = ("all",) if abbreviated else ("all", "large_pool", "small_pool")

    def fmt(v: int, is_bytes: bool) -> str:
        if not is_bytes:
            return str(v)
        for unit in ("B", "KiB", "MiB", "GiB"):
            if abs(v) < 1024 or unit == "GiB":
                return f"{v:.0f} {unit}" if unit == "B" else f"{v:.2f} {unit}"
            v /= 1024
        return str(v)

    idx = _index(device)
    head = f"{'Metric':<34}{'Cur Usage':>14}{'Peak Usage':>14}{'Tot Alloc':>14}{'Tot Freed':>14}"
    lines = [f"neuron memory summary, device {idx} ({get_device_name(idx)})", head, "-" * len(head)]
    for label, key, is_bytes in rows:
        for pool in pools:
            name = label if pool == "all" else f"  from {pool.replace('_pool', '')} pool"
            vals = [
                fmt(int(stats.get(f"{key}.{pool}.{k}", 0)), is_bytes)
                for k in ("current", "peak", "allocated", "freed")
            ]
            lines.append(f"{name:<34}" + "".join(f"{v:>14}" for v in vals))
    lines.append(f"{'OOMs':<34}{stats.get('num_ooms', 0):>14}")
    lines.append(
        f"{'Device allocs / frees':<34}{stats.get('num_device_alloc', 0):>14}"
        f"{stats.get('num_device_free', 0):>14}"
    )
    return "\n".join(lines) + "\n"


def memory_snapshot(mempool_id: Any = None, include_traces: bool = True) -> list[dict[str, Any]]:
    """The caching allocator's segments on every neuron device, as torch.cuda.memory_snapshot:
    each a dict (device, address, total_size, allocated_size, active_size, requested_size,
    stream, segment_type, segment_pool_id, is_expandable, frames) with its blocks in address
    order (address, size, requested_size, state "active_allocated" or "inactive", frames).
    The device has only the default pool, (0, 0): another mempool_id has no segments, as an
    unknown pool on CUDA. No allocation traces are recorded, so frames are empty either way."""
    del include_traces  # accepted as on CUDA; there are no traces to leave out
    if mempool_id is not None and tuple(mempool_id) != (0, 0):
        return []
    return [seg for d in range(device_count()) for seg in _C._memory_snapshot(d)]


def _stat(key: str, device: Any) -> int:
    return int(_C._memory_stats(_index(device)).get(key, 0))


def memory_allocated(device: Any = None) -> int:
    return _stat("allocated_bytes.all.current", device)


def max_memory_allocated(device: Any = None) -> int:
    return _stat("allocated_bytes.all.peak", device)


def memory_reserved(device: Any = None) -> int:
    return _stat("reserved_bytes.all.current", device)


def max_memory_reserved(device: Any = None) -> int:
    return _stat("reserved_bytes.all.peak", device)


def reset_peak_memory_stats(device: Any = None) -> None:
    if is_initialized():
        _C._reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    if is_initialized():
        _C._reset_accumulated_memory_stats(_index(device))


def reset_max_memory_allocated(device: Any = None) -> None:
    reset_peak_memory_stats(device)


def mem_get_info(device: Any = None) -> tuple[int, int]:
    return tuple(_C._mem_get_info(_index(device)))


def empty_cache() -> None:
    _C._empty_cache()


# ---- random numbers (a CPU generator per device: the CPU stream; see accelerator/generator.h) ----
def _generator(device: Any = None) -> torch.Generator:
    return _C._default_generator(_index(device))


def __getattr__(name: str):
    # default_generators: each device's default generator, as torch.cuda.default_generators
    # (built when read, so it follows the visible devices).
    if name == "default_generators":
        return tuple(_C._default_generator(i) for i in range(device_count()))
    # _initialized: torch.cuda's module flag, read by code written for any device module:
    # torch.utils.checkpoint saves and restores the device's RNG state around the recomputation
    # only when `getattr(device_module, "_initialized", False)`, so without it a checkpointed
    # dropout drew a different mask in the backward than in the forward (wrong gradients).
    if name == "_initialized":
        return is_initialized()
    raise AttributeError(f"module 'torch.neuron' has no attribute {name!r}")


def manual_seed(seed: int) -> None:
    _generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for i in range(device_count()):
        _C._default_generator(i).manual_seed(int(seed))


def seed() -> None:
    _generator().seed()


def seed_all() -> None:
    for i in range(device_count()):
        _C._default_generator(i).seed()


def initial_seed() -> int:
    return _generator().initial_seed()


def get_rng_state(device: Any = "neuron") -> torch.Tensor:
    return _generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "neuron") -> None:
    _generator(device).set_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [_C._default_generator(i).get_state() for i in range(device_count())]


def set_rng_state_all(new_states) -> None:
    for i, s in enumerate(new_states):
        _C._default_generator(i).set_state(s)
