"""Whole-program traces in simulated time (``neuronsim run --trace``, ``NEURON_SIM_TRACE``).

The trace is Chrome trace-event JSON (open it in https://ui.perfetto.dev): a ``host`` process
with Python ranges (``torch.profiler.record_function`` and module forwards), ATen op ranges and
host runtime costs on the host clock, and one process per NeuronCore with the device span of
each op (``Ops``), the kernels (``Kernels``), every instruction on per-engine and per-DMA-queue
rows, and HBM / SBUF / PSUM counters, on the device clock. Both clocks count simulated time from
the device's initialisation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json

import torch

from neuronsim import _C, _api

_hooks: list = []


def _pre_hook(module, args):
    # While dynamo traces a module, its ranges are not graph ops (the compiled graph shows in the
    # trace as its own kernels).
    if not torch.compiler.is_compiling():
        _C._range_push(type(module).__name__)


def _post_hook(module, args, output):
    if not torch.compiler.is_compiling():
        _C._range_pop()


def start(path: str, module_ranges: bool = True) -> None:
    """Starts recording the whole program to `path` (initialises the device if needed)."""
    _C._lazy_init()
    _C._trace_start(str(path))
    if module_ranges:
        from torch.nn.modules import module as m

        _hooks.append(m.register_module_forward_pre_hook(_pre_hook))
        _hooks.append(m.register_module_forward_hook(_post_hook))


def stop(extra_metadata: dict | None = None) -> None:
    """Finishes the trace file, recording the op report and configuration in its metadata."""
    for h in _hooks:
        h.remove()
    _hooks.clear()
    if not _C._trace_active():
        return
    meta = {
        "op_report": _api.op_report(),
        "compile": _api.compile_stats(),
        "runtime_config": _C._config(),
        "torch_version": torch.__version__,
    }
    from neuronsim.distributed import _placement

    if _placement._placement is not None:  # one rank of a distributed job
        meta["distributed"] = dataclasses.asdict(_placement._placement)
    meta.update(extra_metadata or {})
    _C._trace_stop(json.dumps(meta))


def active() -> bool:
    return _C._trace_active()


@contextlib.contextmanager
def trace(path: str, module_ranges: bool = True):
    """``with neuronsim.tracing.trace("run.json"): ...`` records everything inside."""
    start(path, module_ranges)
    try:
        yield
    finally:
        stop()
