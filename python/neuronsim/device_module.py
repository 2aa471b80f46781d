"""``torch.neuron``: the device module, with the names CUDA and TorchNeuron users know.

Times reported here (``Event.elapsed_time``) are simulated milliseconds.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from neuronsim import _C

__all__ = [
    "Event",
    "Stream",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "empty_cache",
    "get_amp_supported_dtype",
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
    "memory_stats",
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


def _index(dev: Any = None) -> int:
    if dev is None:
        return current_device()
    if isinstance(dev, int):
        return dev
    if isinstance(dev, str):
        dev = torch.device(dev)
    if isinstance(dev, torch.device):
        if dev.type != "neuron":
            raise ValueError(f"expected a neuron device, got {dev}")
        return current_device() if dev.index is None else dev.index
    raise TypeError(f"invalid device {dev!r}")


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


def set_device(dev: Any) -> None:
    idx = _index(dev)
    if idx >= 0:
        _C._set_device(idx)


class device:
    """Context manager that changes the current neuron device."""

    def __init__(self, dev: Any):
        self.idx = -1 if dev is None else _index(dev)
        self.prev = -1

    def __enter__(self):
        self.prev = current_device()
        if self.idx >= 0 and self.idx != self.prev:
            _C._set_device(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0 and self.idx != self.prev:
            _C._set_device(self.prev)
        return False


def synchronize(dev: Any = None) -> None:
    _C._synchronize(_index(dev))


def get_device_name(dev: Any = None) -> str:
    return _C._device_name(_index(dev))


class _DeviceProperties:
    def __init__(self, d: dict):
        self.__dict__.update(d)

    def __repr__(self) -> str:
        return f"_NeuronDeviceProperties(name='{self.name}', total_memory={self.total_memory})"


def get_device_properties(dev: Any = None) -> _DeviceProperties:
    return _DeviceProperties(_C._device_properties(_index(dev)))


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


def current_stream(dev: Any = None) -> torch.Stream:
    return torch.accelerator.current_stream(_index(dev))


_PRIVATEUSE1 = 20  # c10::DeviceType::PrivateUse1


def default_stream(dev: Any = None) -> torch.Stream:
    return torch.Stream(stream_id=0, device_index=_index(dev), device_type=_PRIVATEUSE1)


def set_stream(s: torch.Stream) -> None:
    torch.accelerator.set_stream(s)


@contextlib.contextmanager
def stream(s: torch.Stream | None):
    if s is None:
        yield
        return
    prev_device = current_device()
    prev = current_stream(s.device_index)
    set_stream(s)  # also makes the stream's device current
    try:
        yield
    finally:
        set_stream(prev)
        _C._set_device(prev_device)


# ---- memory ----
def memory_stats(dev: Any = None) -> dict[str, Any]:
    return dict(sorted(_C._memory_stats(_index(dev)).items()))


def _stat(key: str, dev: Any) -> int:
    return int(_C._memory_stats(_index(dev)).get(key, 0))


def memory_allocated(dev: Any = None) -> int:
    return _stat("allocated_bytes.all.current", dev)


def max_memory_allocated(dev: Any = None) -> int:
    return _stat("allocated_bytes.all.peak", dev)


def memory_reserved(dev: Any = None) -> int:
    return _stat("reserved_bytes.all.current", dev)


def max_memory_reserved(dev: Any = None) -> int:
    return _stat("reserved_bytes.all.peak", dev)


def reset_peak_memory_stats(dev: Any = None) -> None:
    if is_initialized():
        _C._reset_peak_memory_stats(_index(dev))


def reset_accumulated_memory_stats(dev: Any = None) -> None:
    if is_initialized():
        _C._reset_accumulated_memory_stats(_index(dev))


def reset_max_memory_allocated(dev: Any = None) -> None:
    reset_peak_memory_stats(dev)


def mem_get_info(dev: Any = None) -> tuple[int, int]:
    return tuple(_C._mem_get_info(_index(dev)))


def empty_cache() -> None:
    _C._empty_cache()


# ---- random numbers (Philox, 16-byte state: seed, offset) ----
def _generator(dev: Any = None) -> torch.Generator:
    return _C._default_generator(_index(dev))


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


def get_rng_state(dev: Any = "neuron") -> torch.Tensor:
    return _generator(dev).get_state()


def set_rng_state(new_state: torch.Tensor, dev: Any = "neuron") -> None:
    _generator(dev).set_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [_C._default_generator(i).get_state() for i in range(device_count())]


def set_rng_state_all(new_states) -> None:
    for i, s in enumerate(new_states):
        _C._default_generator(i).set_state(s)
