"""TorchNeuron's ``NeuronProfiler``: a PyTorch trace and the Neuron runtime's system and device
traces, together.

Under neuronsim the runtime and device traces are one whole-program trace in simulated time
(``neuronsim.tracing``: host runtime costs, each op's device span, kernels, every instruction per
engine and DMA queue), written as ``neuron_trace.json`` in ``neuron_output_dir``; the PyTorch
trace is ``torch.profiler``'s, exported to ``pytorch_trace_file`` in the same directory.
``event_filters`` selects NRT event types and cores on hardware; the simulated trace keeps every
core and event, so the filters are checked (as TorchNeuron parses them) and otherwise ignored.
"""

from __future__ import annotations

import logging
import os

from neuronsim import tracing
from torch.profiler import ProfilerActivity, profile

logger = logging.getLogger(__name__)

TRACE_FILE = "neuron_trace.json"


class NRTProfilerError(Exception):
    """Exception raised for NRT profiling errors."""


class NeuronProfiler:
    """Unified profiler: the simulated device trace always, a PyTorch trace when
    ``pytorch_activities`` are given.

    Args:
        pytorch_activities: PyTorch profiler activities to enable.
        record_shapes: Record tensor shapes in PyTorch profiling.
        pytorch_trace_file: PyTorch trace file name inside ``neuron_output_dir``
            (default ``pytorch_trace.json`` when PyTorch profiling is on).
        neuron_output_dir: Directory for the trace files (default ``./output``).
        event_filters: ``{"nc": [...], "types": [...]}`` as TorchNeuron takes them.
    """

    def __init__(
        self,
        pytorch_activities: list[ProfilerActivity] | None = None,
        record_shapes: bool = False,
        pytorch_trace_file: str | None = None,
        neuron_output_dir: str = "./output",
        event_filters: dict[str, list[str] | list[int]] | None = None,
    ):
        self.pytorch_activities = pytorch_activities or []
        self.record_shapes = record_shapes
        self.neuron_output_dir = neuron_output_dir
        if self.pytorch_activities:
            name = pytorch_trace_file or "pytorch_trace.json"
            self.pytorch_trace_file = f"{neuron_output_dir}/{name}"
        else:
            self.pytorch_trace_file = None
        self.event_filters = event_filters
        self._is_active = False
        self._nrt_active = False
        self._pytorch_active = False
        self._pytorch_profiler = None

    def _parse_neuroncore_range(self, range_str: str) -> list[int]:
        """'4-7' -> [4, 5, 6, 7] (inclusive); an invalid spec is skipped with a warning."""
        range_str = range_str.strip()
        try:
            if "-" in range_str:
                start, end = (int(x.strip()) for x in range_str.split("-", 1))
                if start > end:
                    logger.warning(f"Invalid range '{range_str}': start > end. Skipping.")
                    return []
                return list(range(start, end + 1))
            return [int(range_str)]
        except ValueError as e:
            logger.warning(f"Failed to parse NeuronCore spec '{range_str}': {e}. Skipping.")
            return []

    def _parse_neuroncore_list(self, nc_list: list[str]) -> list[int]:
        return sorted({c for spec in nc_list for c in self._parse_neuroncore_range(str(spec))})

    def start(self):
        if self._is_active:
            raise RuntimeError("Profiler is already active")
        os.makedirs(self.neuron_output_dir, exist_ok=True)
        if self.event_filters and "nc" in self.event_filters:
            self._parse_neuroncore_list(self.event_filters["nc"])
        if tracing.active():
            raise NRTProfilerError(
                "a neuronsim trace is already being recorded (neuronsim run --trace or "
                "NEURON_SIM_TRACE); only one device trace can be active"
            )
        tracing.start(os.path.join(self.neuron_output_dir, TRACE_FILE))
        self._nrt_active = True
        if self.pytorch_activities:
            self._pytorch_profiler = profile(
                activities=self.pytorch_activities, record_shapes=self.record_shapes
            )
            self._pytorch_profiler.__enter__()
            self._pytorch_active = True
        self._is_active = True

    def stop(self):
        if not self._is_active:
            raise RuntimeError("Profiler is not active")
        try:
            if self._pytorch_active:
                self._pytorch_profiler.__exit__(None, None, None)
                self._pytorch_active = False
                self._pytorch_profiler.export_chrome_trace(self.pytorch_trace_file)
        finally:
            if self._nrt_active:
                tracing.stop()
                self._nrt_active = False
            self._is_active = False

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if self._is_active:
            self.stop()
        return False

    def is_active(self) -> bool:
        return self._is_active

    def has_pytorch_profiling(self) -> bool:
        return bool(self.pytorch_activities)

    def get_pytorch_trace(self) -> str | None:
        if self._pytorch_profiler is not None:
            return str(self._pytorch_profiler)
        return None

    def get_nrt_output_directory(self) -> str:
        return self.neuron_output_dir

    def export_pytorch_trace(self, filename: str):
        if self._pytorch_profiler is None:
            raise ValueError("PyTorch profiling not enabled or not started")
        if self._pytorch_active:
            raise ValueError("Cannot export trace while profiling is active")
        self._pytorch_profiler.export_chrome_trace(filename)
