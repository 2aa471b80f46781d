"""``torch.neuron``: the device module, with the names CUDA and TorchNeuron users know.

Where TorchNeuron's ``torch.neuron`` (``torch_neuronx/neuron.py``) and ``torch.cuda`` differ, a
caller sees TorchNeuron's: ``get_device_name`` is ``"neuron:0"``, ``get_device_properties().name``
the instance family (``"trn1"``), ``memory_summary`` has TorchNeuron's title, and
``memory_stats`` carries TorchNeuron's keys next to CUDA's flat ones. Times reported here
(``Event.elapsed_time``) are simulated milliseconds.
"""

from __future__ import annotations

import json
import sys
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
    "get_dynamo_metrics",
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
    "query",
    "record_event",
    "reset_accumulated_memory_stats",
    "reset_dynamo_metrics",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_device",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "stream",
    "synchronize",
    "wait_event",
    "wait_stream",
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


class InvalidDeviceIndexError(ValueError, RuntimeError):
    """A device index past the visible devices: TorchNeuron raises ValueError for it, torch.cuda
    (and neuronsim's C++ checks) RuntimeError; this is both."""


def check_index(idx: int) -> None:
    n = device_count()
    if not 0 <= idx < n:
        raise InvalidDeviceIndexError(
            f"Invalid device id: {idx}. Valid range is 0 to {n - 1} (Invalid neuron device index "
            f"{idx}: {n} neuron devices are visible; NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES "
            "select them)"
        )


def _stand_in(name: str):
    # TorchNeuron's torch.neuron calls torch_neuronx's function of the same name (tests patch
    # it there); once torch_neuronx is imported, so does this module.
    module = sys.modules.get("torch_neuronx")
    return getattr(module, name, None) if getattr(module, "_is_loaded", False) else None


def set_device(device: Any) -> None:
    idx = _index(device)  # None and an index-less device: the current device
    if idx < 0:
        return
    delegate = _stand_in("set_device")
    if delegate is not None:
        delegate(idx)
        return
    check_index(idx)
    _C._set_device(idx)


class device:
    """Context manager that changes the current neuron device."""

    def __init__(self, device: Any):
        self.idx = -1 if device is None else _index(device)
        self.prev = -1

    def __enter__(self):
        self.prev = current_device()
        if self.idx >= 0 and self.idx != self.prev:
            set_device(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0 and self.idx != self.prev:
            _C._set_device(self.prev)
        return False


def synchronize(device: Any = None) -> None:
    _C._synchronize(_index(device))


def get_device_name(device: Any = 0) -> str:
    """The name TorchNeuron reports: the device as a string, ``"neuron:0"`` for ``0`` (the
    default, as TorchNeuron's) and ``str(device)`` for a torch.device. None (the current device)
    and strings are accepted too; any other type is TorchNeuron's ValueError."""
    if device is None:
        return f"neuron:{current_device()}"
    if isinstance(device, str):
        try:
            device = torch.device(device)
        except RuntimeError:
            device = None  # not a device string: TorchNeuron's ValueError below
    if isinstance(device, torch.device | int) and not isinstance(device, bool):
        _index(device)  # a neuron device, or the ValueError naming what it is
        return str(device) if isinstance(device, torch.device) else f"neuron:{device}"
    raise ValueError(
        "Incorrect device argument found, expected torch.device or int type, found "
        f"{type(device) if device is not None else str}"
    )


class NeuronDeviceProperties:
    """TorchNeuron's ``NeuronDeviceProperties``: ``name`` is the instance family the preset
    models (``"trn1"``, ``"trn2"``; TorchNeuron reports the Neuron runtime's instance family),
    ``total_memory`` the logical core's HBM in bytes. neuronsim adds the preset, the instance,
    the first physical core and peak rates."""

    def __init__(self, d: dict):
        self.__dict__.update(d)

    def __repr__(self) -> str:
        return f"<NeuronDeviceProperties(name='{self.name}', total_memory={self.total_memory})>"


def _instance_family(instance: str) -> str:
    # "trn1.2xlarge" -> "trn1", "trn2.48xlarge" -> "trn2": what nrt_get_instance_info names.
    return instance.split(".", 1)[0]


def properties(idx: int) -> NeuronDeviceProperties:
    """The properties of device `idx` (TorchNeuron's _C._neuron_getDeviceProperties)."""
    props = dict(_C._device_properties(idx))
    props["name"] = _instance_family(props["instance"])
    return NeuronDeviceProperties(props)


def get_device_properties(device: Any = None) -> NeuronDeviceProperties:
    delegate = _stand_in("get_device_properties")
    if delegate is not None:
        return delegate(str(device) if device is not None else current_device())
    return properties(_index(device))


def get_device_capability(device: Any = None) -> tuple[int, int]:
    """(major, minor) of the NeuronCore generation the preset models: (2, 0) for NeuronCore-v2
    (trn1), (3, 0) for NeuronCore-v3 (trn2)."""
    preset = json.loads(_C._preset_text(get_device_properties(device).preset))
    generation = preset["preset"]["generation"]  # "NeuronCore-v2"
    return int(generation.rsplit("-v", 1)[1]), 0


def get_amp_supported_dtype() -> list[torch.dtype]:
    # TorchNeuron's list (torch.amp.autocast accepts these dtypes for the device).
    return [torch.float32, torch.float16, torch.bfloat16]


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

    def __getattr__(cls, name: str) -> Any:
        # Event.record, Event.elapsed_time, ...: torch.Event's methods (its instances' class).
        return getattr(torch.Event, name)


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


def set_stream(stream: torch.Stream) -> None:
    torch.accelerator.set_stream(stream)


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


# The current stream's operations, as TorchNeuron's torch.neuron has them.
def wait_stream(stream: torch.Stream) -> None:
    current_stream().wait_stream(stream)


def wait_event(event: torch.Event) -> None:
    current_stream().wait_event(event)


def record_event(event: torch.Event | None = None) -> torch.Event:
    s = current_stream()
    if event is None:
        return s.record_event()
    event.record(s)
    return event


def query() -> bool:
    return current_stream().query()


def _sleep(cycles: int) -> None:
    """TorchNeuron's ``torch.neuron._sleep`` does nothing (not implemented there); so here."""
    del cycles


# torch.compile's metrics in TorchNeuron's records (torch_neuronx.get_dynamo_metrics).
def get_dynamo_metrics():
    from torch_neuronx import get_dynamo_metrics as metrics

    return metrics()


def reset_dynamo_metrics() -> None:
    from torch_neuronx import reset_dynamo_metrics as reset

    reset()


# ---- memory ----
def memory_stats(device: Any = None) -> dict[str, Any]:
    """CUDA's flat keys (``"allocated_bytes.all.current"``, as torch.accelerator.memory_stats)
    and TorchNeuron's (``stats["allocated_bytes"]["current"]``, ``"allocation_requests"``, ...;
    ``torch_neuronx.memory_stats`` has only those): code written for either reads its own."""
    flat = _C._memory_stats(_index(device))
    return {**dict(sorted(flat.items())), **torchneuron_memory_stats(flat)}


def torchneuron_memory_stats(flat: dict[str, Any]) -> dict[str, Any]:
    """TorchNeuron's memory_stats schema from the allocator's CUDA-style statistics: byte
    statistics as {current, peak, allocated, freed}, and its four counters."""

    def byte_stat(key: str) -> dict[str, int]:
        return {
            k: int(flat.get(f"{key}.all.{k}", 0)) for k in ("current", "peak", "allocated", "freed")
        }

    return {
        "allocated_bytes": byte_stat("allocated_bytes"),
        "reserved_bytes": byte_stat("reserved_bytes"),
        "active_bytes": byte_stat("active_bytes"),
        "num_alloc_retries": int(flat.get("num_alloc_retries", 0)),
        "num_ooms": int(flat.get("num_ooms", 0)),
        "num_tensor_frees": int(flat.get("allocation.all.freed", 0)),
        "allocation_requests": int(flat.get("allocation.all.allocated", 0)),
    }


def memory_stats_as_nested_dict(device: Any = None) -> dict[str, Any]:
    """memory_stats() nested at its dots, as torch.cuda.memory_stats_as_nested_dict."""
    nested: dict[str, Any] = {}
    for key, value in _C._memory_stats(_index(device)).items():
        *path, leaf = key.split(".")
        d = nested
        for part in path:
            d = d.setdefault(part, {})
        d[leaf] = value
    return nested


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A table of the allocator's statistics (current, peak, allocated and freed totals), as
    torch.cuda.memory_summary prints; abbreviated leaves out the per-pool rows."""
    stats = _C._memory_stats(_index(device))
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
    # TorchNeuron's title line.
    lines = [f"Neuron Memory Summary, Device {idx}", head, "-" * len(head)]
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
    # torch.neuron.memory: TorchNeuron's memory module (its memory_stats schema).
    if name == "memory":
        import torch_neuronx.memory

        return torch_neuronx.memory
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


def get_rng_state(device: Any = None) -> torch.Tensor:
    """The device generator's state: TorchNeuron's 16 bytes (seed, offset)."""
    return _generator(device).get_state()


def set_rng_state(
    state: torch.Tensor | None = None, device: Any = None, *, new_state: torch.Tensor | None = None
) -> None:
    """Sets the device generator's state (TorchNeuron's ``state``; torch.cuda's keyword
    ``new_state`` too). The CPU stream the device's random ops draw from is not touched."""
    state = new_state if state is None else state
    if state is None:
        raise TypeError("set_rng_state() missing 1 required positional argument: 'state'")
    _generator(device).set_state(state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [_C._default_generator(i).get_state() for i in range(device_count())]


def set_rng_state_all(new_states) -> None:
    for i, s in enumerate(new_states):
        _C._default_generator(i).set_state(s)
