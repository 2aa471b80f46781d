"""``nki.typing``: tensor placeholders (shape and dtype without values) for neuronsim's
timing API."""

from neuronsim.nki._jit import Placeholder, _TensorType

tensor = _TensorType()
__all__ = ["tensor", "Placeholder"]
