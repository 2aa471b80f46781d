"""neuronsim's own functions: configuration, the simulated clock, op tracking and reports."""

from __future__ import annotations

import json
from typing import Any

from neuronsim import _C


def configure(
    preset: str = "trn1",
    set: list[str] | tuple[str, ...] = (),  # noqa: A002 - mirrors the --set flag
    visible_cores: list[int] | tuple[int, ...] = (),
    launch_blocking: bool = False,
    isa_mode: bool = False,
) -> None:
    """Chooses the simulated hardware before the first use of a neuron device.

    Equivalent to NEURON_SIM_PRESET / NEURON_SIM_SET / NEURON_RT_VISIBLE_CORES /
    NEURON_LAUNCH_BLOCKING / NEURON_SIM_MODE=isa. Raises once the device is in use.
    """
    _C._configure(preset, list(set), list(visible_cores), launch_blocking, isa_mode)


def simulated_time_ns() -> float:
    """The device clock: simulated nanoseconds since the device was initialised."""
    return _C._device_time_ns() if _C._is_initialized() else 0.0


def host_time_ns() -> float:
    """The host clock: launch overheads, CPU fallbacks and waits, in simulated nanoseconds."""
    return _C._host_time_ns() if _C._is_initialized() else 0.0


def device_stats() -> dict[str, Any]:
    """Every device statistic (per engine instructions, busy time, bytes moved), with units."""
    if not _C._is_initialized():
        return {}
    return json.loads(_C._device_stats_json())


def get_executed_ops() -> set[str]:
    """ATen ops called with neuron tensors since the last clear that ran without the CPU fallback
    (nor any op inside them), as TorchNeuron names them: ``"aten::add.Tensor"``,
    ``"aten::linear"`` (composite ops, factories and views included)."""
    return set(_C._executed_ops())


def get_fallback_ops() -> set[str]:
    """ATen ops since the last clear that took the CPU fallback, or ran an op inside that did."""
    return set(_C._fallback_ops())


def clear_op_tracking() -> None:
    _C._clear_op_tracking()


def op_report() -> dict[str, dict[str, int]]:
    """Per-op counts since the last clear: native, fallback, computed_at_32_bits (64-bit data).
    An op is in ``get_executed_ops()`` iff its native count is non-zero, in ``get_fallback_ops()``
    iff its fallback count is."""
    return dict(sorted(_C._op_counts().items()))


def compile_stats() -> dict[str, Any]:
    """What torch.compile did on the device: graphs (forward, backward), recompilations and graph
    breaks with their reasons, compile time, fused regions, nodes left to eager kernels or the
    host and why, and one entry per compiled graph (``per_graph``)."""
    from neuronsim.torch_compile.stats import compile_stats as stats

    return stats()
