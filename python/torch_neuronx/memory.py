"""TorchNeuron's memory API (``torch_neuronx.memory``) over neuronsim's caching allocator.

``memory_stats`` has TorchNeuron's schema: byte statistics (``allocated_bytes``,
``reserved_bytes``, ``active_bytes``) as {current, peak, allocated, freed}, and the counters
``num_alloc_retries``, ``num_ooms``, ``num_tensor_frees``, ``allocation_requests``. The values are
the simulated allocator's: unlike TorchNeuron's (which does not cache yet, so its reserved bytes
are 0), it caches freed blocks as CUDA's does, so ``reserved_bytes`` counts the cache.
"""

from __future__ import annotations

from typing import Any

import torch
from neuronsim import _C as _sim
from neuronsim import device_module as _dm


def _get_device_index(device: int | torch.device | None = None) -> int:
    """Get device index, defaulting to current device."""
    if device is None:
        return _dm.current_device()
    return _dm._index(device)


def memory_stats(device: int | torch.device | None = None) -> dict[str, Any]:
    """A dictionary of memory allocator statistics for a device (TorchNeuron's keys)."""
    return _dm.torchneuron_memory_stats(_sim._memory_stats(_get_device_index(device)))


def memory_allocated(device: int | torch.device | None = None) -> int:
    """Current memory occupied by tensors in bytes."""
    return memory_stats(device)["allocated_bytes"]["current"]


def max_memory_allocated(device: int | torch.device | None = None) -> int:
    """Peak memory occupied by tensors in bytes since the last reset."""
    return memory_stats(device)["allocated_bytes"]["peak"]


def memory_reserved(device: int | torch.device | None = None) -> int:
    """Current memory held by the caching allocator in bytes."""
    return memory_stats(device)["reserved_bytes"]["current"]


def max_memory_reserved(device: int | torch.device | None = None) -> int:
    """Peak memory held by the caching allocator in bytes since the last reset."""
    return memory_stats(device)["reserved_bytes"]["peak"]


def reset_peak_memory_stats(device: int | torch.device | None = None) -> None:
    """Reset the peak memory statistics for a device."""
    _dm.reset_peak_memory_stats(_get_device_index(device))


def reset_accumulated_memory_stats(device: int | torch.device | None = None) -> None:
    """Reset the accumulated memory statistics (counters, allocated/freed totals)."""
    _dm.reset_accumulated_memory_stats(_get_device_index(device))


def memory_summary(device: int | torch.device | None = None, abbreviated: bool = False) -> str:
    """A human-readable summary of memory usage for a device ("Neuron Memory Summary, Device N")."""
    return _dm.memory_summary(_get_device_index(device), abbreviated)
