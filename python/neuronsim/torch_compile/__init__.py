"""torch.compile on the neuron device: FX graphs -> the neuron graph compiler (kernels/graph)."""

from neuronsim.torch_compile.backend import neuron_backend
from neuronsim.torch_compile.stats import compile_stats

__all__ = ["compile_stats", "neuron_backend"]
