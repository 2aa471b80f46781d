"""``nki.language`` (current NKI): the shared surface; loops are Python loops here."""

from neuronsim.nki.language_common import *  # noqa: F401,F403
from neuronsim.nki.language_common import (  # noqa: F401
    abs,
    max,
    min,
    sum,
)
