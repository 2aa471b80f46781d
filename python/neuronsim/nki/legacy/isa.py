"""``neuronxcc.nki.isa`` (legacy NKI): ISA calls that return their result tile."""

from neuronsim.nki.isa_common import *  # noqa: F401,F403
