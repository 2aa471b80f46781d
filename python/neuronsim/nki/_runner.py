"""Running a traced kernel on the simulated NeuronCore: HBM for its tensors, the launch through
the runtime (``neuronsim._C``), the outputs back as numpy arrays."""

import os
import sys
import time

import numpy as np

from neuronsim.nki import _lowering
from neuronsim.nki._dtypes import as_dtype
from neuronsim.nki.errors import NkiError

_announced = False


def _c():
    import neuronsim

    return neuronsim._C


def core_params() -> dict:
    return dict(_c()._nki_core_params())


def announce() -> None:
    """Says once which NKI runs the kernels when a real one is installed too."""
    global _announced  # noqa: PLW0603
    if _announced:
        return
    _announced = True
    import _neuronsim_names

    real = _neuronsim_names.real_packages() if os.environ.get("NEURON_SIM") == "1" else []
    if real:
        p = core_params()
        print(
            f"neuronsim: NKI kernels run on neuronsim's simulated {p['preset']} NeuronCore "
            f"(NEURON_SIM=1 routes {', '.join(real)} here; unset it for the installed one)",
            file=sys.stderr,
        )


def device_index() -> int:
    return int(_c()._current_device())


def place_hbm(trace, buf, host_array) -> None:
    """Gives an HBM tensor its memory: the caller's neuron tensor, or a fresh allocation (filled
    from `host_array` when values are computed)."""
    if getattr(trace, "no_memory", False):
        return
    if host_array is None and getattr(trace, "torch_device", None) is not None:
        # An output of a kernel called on neuron tensors: a neuron tensor too.
        import torch

        from neuronsim.nki._dtypes import as_dtype

        name = str(as_dtype(buf.dtype))
        dt = torch.bfloat16 if name == "bfloat16" else getattr(torch, name)
        host_array = torch.empty(buf.shape, dtype=dt, device=trace.torch_device)
    if host_array is not None and hasattr(host_array, "data_ptr"):  # a torch tensor on neuron
        buf.hbm_ptr = 0
        buf.hbm_address = int(_c()._nki_hbm_address(host_array.data_ptr()))
        buf.host_array = host_array
        return
    ptr, addr = _c()._nki_hbm_alloc(int(buf.bytes), trace.device)
    trace.hbm_allocations.append(ptr)
    buf.hbm_ptr, buf.hbm_address = int(ptr), int(addr)
    if trace.full and host_array is not None:
        # As raw bytes: the buffer protocol does not carry bfloat16 / fp8 (ml_dtypes) types.
        _c()._nki_hbm_write(buf.hbm_ptr, np.ascontiguousarray(host_array).view(np.uint8))


def read_hbm(buf) -> np.ndarray:
    data = _c()._nki_hbm_read(buf.hbm_ptr, int(buf.bytes))
    return np.frombuffer(data, dtype=as_dtype(buf.dtype)).reshape(buf.shape).copy()


def release(trace) -> None:
    for ptr in trace.hbm_allocations:
        _c()._nki_hbm_free(ptr)
    trace.hbm_allocations.clear()


class RunInfo:
    """What one launch took: simulated time and the host's cost of each stage."""

    def __init__(self, r: dict, trace_seconds: float, build_seconds: float):
        self.engines = {}
        self.lines = []
        self.run_seconds = 0.0
        self.start_ns = self.end_ns = 0
        self.peak_flops = 1.0
        self.tensor_flops = self.model_flops = 0
        self.__dict__.update(r)
        self.trace_seconds = trace_seconds
        self.build_seconds = build_seconds

    @property
    def latency_us(self) -> float:
        return (self.end_ns - self.start_ns) / 1e3

    @property
    def hfu(self) -> float:
        """Hardware FLOPs utilisation as the Neuron profiler defines it: every TensorE
        instruction's work (transposes included) over the peak for the kernel's duration."""
        t = (self.end_ns - self.start_ns) * 1e-9
        return self.tensor_flops / (self.peak_flops * t) if t > 0 else 0.0

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation: the matmuls only (no transposes)."""
        t = (self.end_ns - self.start_ns) * 1e-9
        return self.model_flops / (self.peak_flops * t) if t > 0 else 0.0


def launch(trace, trace_seconds: float, line_stats: bool = False) -> RunInfo:
    from neuronsim.nki import _ops

    announce()
    t0 = time.perf_counter()
    kernel = _lowering.build(trace, _ops.params())
    build_s = time.perf_counter() - t0
    try:
        r = _c()._nki_launch(kernel, trace.full, trace.device, line_stats)
    except _c().NkiKernelError as e:
        msg = str(e)
        rule = msg.split(": ", 2)[1] if msg.count(": ") >= 2 else "kernel"
        raise NkiError(
            rule,
            msg.split(": ", 2)[-1] if msg.count(": ") >= 2 else msg,
            msg.split(": ", 1)[0] if msg.count(": ") >= 2 else "",
        ) from None
    info = RunInfo(dict(r), trace_seconds, build_s)
    if os.environ.get("NEURONSIM_NKI_VERBOSE") == "1":
        print(
            f"neuronsim nki: {trace.name}: {info.instructions} instructions, "
            f"{info.latency_us:.2f} us simulated; host: trace {trace_seconds:.3f} s, "
            f"build {build_s:.3f} s, convert {info.convert_seconds:.3f} s, lower "
            f"{info.lower_seconds:.3f} s, run {info.run_seconds:.3f} s",
            file=sys.stderr,
        )
    return info
