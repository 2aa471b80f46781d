"""``nki``: the current NKI package (0.3+, trn2/trn3), on the simulated NeuronCore.

Kernels run their loops as Python (the current compiler's control flow); ISA calls write into a
destination (``nisa.nc_matmul(dst, stationary, moving)``). ``nki.simulate(kernel)(*arrays)`` and
a plain call on numpy arrays compute values; the package has no public timing API, so neuronsim
adds the legacy one: ``nki.benchmark(warmup=, iters=)(kernel)(*args)`` sets
``.benchmark_result.nc_latency.get_latency_percentile(p)`` (simulated microseconds).
"""

from neuronsim.nki import _jit
from neuronsim.nki.current import isa, language, typing  # noqa: F401
from neuronsim.nki.errors import NkiError

jit = _jit.make_jit("current")
simulate = _jit.make_simulate("current")
benchmark = _jit.make_benchmark("current")
profile = _jit.make_profile("current")
tensor = typing.tensor
__version__ = "0.6.0+neuronsim"

__all__ = [
    "jit",
    "simulate",
    "benchmark",
    "profile",
    "language",
    "isa",
    "typing",
    "tensor",
    "NkiError",
]
