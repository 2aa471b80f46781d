"""``neuronxcc.nki``: the legacy NKI API (Neuron SDK <= 2.27), on the simulated NeuronCore.

``nki.jit`` kernels called on numpy arrays compute their values on the simulated engines;
``nki.benchmark`` times them (simulated microseconds through the usual percentile API); an
``affine_range`` loop body is traced once, as the NKI compiler traces it.
"""

from neuronsim.nki import _jit
from neuronsim.nki.errors import NkiError
from neuronsim.nki.legacy import compiler, isa, language, typing  # noqa: F401

jit = _jit.make_jit("legacy")
baremetal = _jit.make_baremetal("legacy")
benchmark = _jit.make_benchmark("legacy")
profile = _jit.make_profile("legacy")
simulate_kernel = _jit.make_simulate_kernel("legacy")
simulate = _jit.make_simulate("legacy")
trace = jit  # nki.trace (an alias of jit in 2.2x)
tensor = typing.tensor
FrameworkKernel = _jit.Kernel

__all__ = [
    "jit",
    "baremetal",
    "benchmark",
    "profile",
    "simulate_kernel",
    "simulate",
    "language",
    "isa",
    "typing",
    "compiler",
    "tensor",
    "NkiError",
]
