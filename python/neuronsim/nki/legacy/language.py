"""``neuronxcc.nki.language`` (legacy NKI): the shared nki.language surface."""

from neuronsim.nki.language_common import *  # noqa: F401,F403
from neuronsim.nki.language_common import (  # noqa: F401
    abs,
    max,
    min,
    sum,
)
