"""Kernel objects and the entry points that run them: ``nki.jit`` (numpy, placeholders, torch
tensors on ``neuron``), ``nki.baremetal``, ``nki.benchmark``, ``nki.profile``,
``nki.simulate_kernel`` and ``nki.simulate``, for either API generation."""

import functools
import gc
import inspect
import math
import time

import numpy as np

from neuronsim.nki import _ops, _runner, _trace
from neuronsim.nki._dtypes import as_dtype
from neuronsim.nki._expr import LoopVar
from neuronsim.nki._tensor import Tensor
from neuronsim.nki.errors import NkiError


class Placeholder:
    """``nt.tensor[[8192, 4096], nl.bfloat16]``: a shape and dtype with no values (benchmarks
    run timing-only on it)."""

    def __init__(self, shape, dtype):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = as_dtype(dtype)

    def __repr__(self):
        return f"tensor[{list(self.shape)}, {self.dtype}]"


class _TensorType:
    def __getitem__(self, key):
        shape, dtype = key
        return Placeholder(shape, dtype)

    def __call__(self, shape, dtype):
        return Placeholder(shape, dtype)


def _is_torch(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def _is_array(x):
    return isinstance(x, np.ndarray | Placeholder) or _is_torch(x)


class LatencyPercentiles:
    """``benchmark_result.nc_latency``: simulated kernel latency in microseconds. The
    simulation is deterministic, so every iteration takes the same time and every percentile
    is that time."""

    def __init__(self, latencies_us):
        self._lat = sorted(latencies_us)

    def get_latency_percentile(self, percentile):
        if not self._lat:
            raise NkiError("benchmark", "the kernel has not been run")
        p = float(percentile)
        if not 0 <= p <= 100:
            raise NkiError("benchmark", f"percentile {percentile} is outside 0..100")
        i = min(len(self._lat) - 1, int(round(p / 100 * (len(self._lat) - 1))))
        return self._lat[i]


class BenchmarkResult:
    def __init__(self, info, iters):
        self.info = info
        self.nc_latency = LatencyPercentiles([info.latency_us] * max(1, iters))

    @property
    def hfu(self):
        return self.info.hfu


class Kernel:
    """An NKI kernel (``@nki.jit``). Call it on numpy arrays (values and time on the simulated
    NeuronCore), on ``nt.tensor`` placeholders (time only) or on ``neuron`` torch tensors;
    ``kernel[grid]`` launches an SPMD grid."""

    def __init__(self, fn, generation, mode="auto", grid=(), **options):
        self.fn = fn
        self.generation = generation
        self.mode = mode
        self.grid = grid
        self.options = options
        self.last_run = None
        functools.update_wrapper(self, fn)

    @property
    def func(self):
        return self.fn

    def __getitem__(self, grid):
        if not isinstance(grid, tuple):
            grid = (grid,)
        return Kernel(self.fn, self.generation, self.mode, grid, **self.options)

    def __call__(self, *args, **kwargs):
        if _trace.active() is not None:  # a sub-kernel: traced inline
            return self.fn(*args, **kwargs)
        outputs, info = run(self, args, kwargs)
        return outputs

    def __repr__(self):
        return f"<nki kernel {self.fn.__name__} ({self.generation})>"


def _bind_names(fn, args, kwargs):
    try:
        sig = inspect.signature(fn)
        bound = sig.bind_partial(*args, **kwargs)
        names = {}
        for name, value in bound.arguments.items():
            names[id(value)] = name
        return names
    except (TypeError, ValueError):
        return {}


def run(kernel, args, kwargs, full=None, line_stats=False):
    """Traces `kernel` on `args`, runs it, returns (outputs, RunInfo). `full`: compute values
    (default: when every array argument has values)."""
    from neuronsim.nki import language_common as lc

    arrays = [a for a in list(args) + list(kwargs.values()) if _is_array(a)]
    if full is None:
        full = not any(isinstance(a, Placeholder) for a in arrays)
    torch_args = [a for a in arrays if _is_torch(a)]
    t0 = time.perf_counter()
    trace = _trace.Trace(kernel.fn.__name__, kernel.generation, full)
    trace.device = _runner.device_index()
    if torch_args and torch_args[0].device.type == "neuron":
        trace.device = int(torch_args[0].device.index or 0)
        trace.torch_device = torch_args[0].device
    else:
        trace.torch_device = None
    names = _bind_names(kernel.fn, args, kwargs)
    _ops.params()
    # A traced kernel is many small objects that live until the launch: the cyclic collector's
    # full passes over them grew with their count (tens of seconds for a 40k-instruction
    # current-generation kernel); nothing here makes cycles worth collecting early.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        with _trace.tracing(trace):

            def wrap(a):
                if not _is_array(a):
                    return a
                if isinstance(a, np.ndarray) and a.dtype == np.float64:
                    raise NkiError(
                        "dtype-support",
                        f"argument {names.get(id(a), '?')} is float64: NeuronCores "
                        "compute float32, bfloat16, float16, fp8 and int types",
                    )
                host = a if not isinstance(a, Placeholder) else None
                if _is_torch(a) and a.device.type != "neuron":
                    host = a.detach().cpu().float().numpy().astype(as_dtype(a.dtype))
                return _ops.new_hbm(a.shape, a.dtype, names.get(id(a), "arg"), host)

            wargs = [wrap(a) for a in args]
            wkwargs = {k: wrap(v) for k, v in kwargs.items()}
            _open_grid(trace, kernel, lc)
            result = kernel.fn(*wargs, **wkwargs)
            _close_grid(trace)
        trace_s = time.perf_counter() - t0
        info = _runner.launch(trace, trace_s, line_stats)
        kernel.last_run = info
        outputs = _collect(trace, result)
    finally:
        if gc_was_enabled:
            gc.enable()
        if trace.torch_device is None:
            _runner.release(trace)
    return outputs, info


def trace_only(kernel, args, kwargs):
    """Traces without running (no device memory): what the kernel returns, as tensors."""
    from neuronsim.nki import language_common as lc

    trace = _trace.Trace(kernel.fn.__name__, kernel.generation, False)
    trace.no_memory = True
    trace.torch_device = None
    _ops.params()
    with _trace.tracing(trace):
        wargs = [_ops.new_hbm(a.shape, a.dtype, "arg") if _is_array(a) else a for a in args]
        wkwargs = {
            k: _ops.new_hbm(v.shape, v.dtype, k) if _is_array(v) else v for k, v in kwargs.items()
        }
        _open_grid(trace, kernel, lc)
        result = kernel.fn(*wargs, **wkwargs)
        _close_grid(trace)
    return result


def _open_grid(trace, kernel, lc):
    """The SPMD grid: instances run one after another on one core (sequential loops whose
    indices are nl.program_id), except a ``nl.nc(k)`` part, which spreads over the k physical
    cores of the logical core (program instance = physical core)."""
    trace.program_ids = []
    trace.grid_sizes = []
    trace.grid_loops = 0
    grid = kernel.grid
    if kernel.generation == "current" and grid:
        # kernel[lnc]: the logical core's physical cores.
        lnc = math.prod([int(g) for g in grid])
        _set_cores(trace, lnc)
        if lnc > 1:
            trace.program_ids = [LoopVar(trace.core_var)]
            trace.grid_sizes = [lnc]
        return
    for d in grid:
        if isinstance(d, lc.SpmdDim):
            ncs = [x for x in d.dims if isinstance(x, lc._NC)]
            rest = math.prod([int(x) for x in d.dims if not isinstance(x, lc._NC)])
            cores = ncs[0].n if ncs else 1
            _set_cores(trace, cores)
            j = trace.open_loop(rest, "sequential")
            trace.grid_loops += 1
            pid = LoopVar(j) * cores + LoopVar(trace.core_var) if cores > 1 else LoopVar(j)
            trace.program_ids.append(pid)
            trace.grid_sizes.append(rest * cores)
        else:
            n = int(d)
            j = trace.open_loop(n, "sequential")
            trace.grid_loops += 1
            trace.program_ids.append(LoopVar(j))
            trace.grid_sizes.append(n)


def _set_cores(trace, cores):
    if cores <= 1:
        return
    limit = _ops.params()["logical_core_size"]
    if cores > limit:
        raise NkiError(
            "grid",
            f"the kernel asks for {cores} physical cores per logical core; the "
            f"{_ops.params()['preset']} preset has {limit} (nl.nc(2) / kernel[2] need "
            "trn2: NEURON_SIM_PRESET=trn2)",
        )
    trace.grid = cores
    trace.core_var = trace.new_var()


def _close_grid(trace):
    for _ in range(trace.grid_loops):
        trace.close_loop()


def _collect(trace, result):
    def one(x):
        if isinstance(x, Tensor):
            if x.buf.space != "hbm":
                raise NkiError(
                    "kernel-output",
                    f"the kernel returns {x.buf.name}, an on-chip tile: return HBM "
                    "tensors (nl.ndarray(..., buffer=nl.shared_hbm))",
                )
            if x.buf.host_array is not None and hasattr(x.buf.host_array, "data_ptr"):
                return x.buf.host_array
            if not trace.full:
                return None
            return _runner.read_hbm(x.buf)
        return x

    if isinstance(result, tuple):
        return tuple(one(x) for x in result)
    if isinstance(result, list):
        return [one(x) for x in result]
    return one(result)


# ---- entry points ----
def make_jit(generation):
    def jit(func=None, mode="auto", **options):
        if func is None:
            return lambda f: jit(f, mode=mode, **options)
        if isinstance(func, Kernel):
            return func
        return Kernel(func, generation, mode, **options)

    return jit


def _as_kernel(k, generation):
    return k if isinstance(k, Kernel) else Kernel(k, generation)


def make_baremetal(generation):
    def baremetal(kernel=None, **options):
        if kernel is None:
            return lambda k: baremetal(k, **options)
        return _as_kernel(kernel, generation)

    return baremetal


class Benchmarked:
    """``nki.benchmark(...)(kernel)``: calling it runs the kernel timing-only (benchmarks do
    not use the inputs' values) and sets ``benchmark_result``."""

    def __init__(self, kernel, warmup=5, iters=10, save_trace_name=None, **options):
        self.kernel = kernel
        self.warmup = warmup
        self.iters = iters
        self.save_trace_name = save_trace_name
        self.benchmark_result = None
        functools.update_wrapper(self, kernel.fn)

    def __getitem__(self, grid):
        return Benchmarked(self.kernel[grid], self.warmup, self.iters, self.save_trace_name)

    def __call__(self, *args, **kwargs):
        from neuronsim.nki import _profile

        with _profile.maybe_trace(self.save_trace_name):
            _, info = run(self.kernel, args, kwargs, full=False)
        self.benchmark_result = BenchmarkResult(info, self.iters)
        return None


def make_benchmark(generation):
    def benchmark(
        kernel=None,
        warmup=5,
        iters=10,
        save_neff_name=None,
        save_trace_name=None,
        additional_compile_opt=None,
        **options,
    ):
        if kernel is None:
            return lambda k: Benchmarked(_as_kernel(k, generation), warmup, iters, save_trace_name)
        return Benchmarked(_as_kernel(kernel, generation), warmup, iters, save_trace_name)

    return benchmark


def make_profile(generation):
    def profile(
        kernel=None,
        working_directory=None,
        save_neff_name=None,
        save_trace_name=None,
        profile_nth=1,
        **options,
    ):
        import os

        path = save_trace_name or "profile.json"
        if working_directory:
            path = os.path.join(working_directory, path)
        if kernel is None:
            return lambda k: Benchmarked(_as_kernel(k, generation), 0, 1, path)
        return Benchmarked(_as_kernel(kernel, generation), 0, 1, path)

    return profile


def make_simulate_kernel(generation):
    def simulate_kernel(kernel, *args, **kwargs):
        outputs, _ = run(_as_kernel(kernel, generation), args, kwargs, full=True)
        return outputs

    return simulate_kernel


def make_simulate(generation):
    def simulate(kernel):
        k = _as_kernel(kernel, generation)

        def call(*args, **kwargs):
            outputs, _ = run(k, args, kwargs, full=True)
            return outputs

        return call

    return simulate
