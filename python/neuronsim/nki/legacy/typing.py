"""``neuronxcc.nki.typing``: ``tensor[[shape], dtype]`` placeholders for benchmarks."""

from neuronsim.nki._jit import Placeholder, _TensorType

tensor = _TensorType()
__all__ = ["tensor", "Placeholder"]
