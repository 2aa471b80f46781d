"""neuronsim's NKI front end: NKI kernels (the Neuron Kernel Interface) traced, lowered to the
simulated NeuronCore's ISA and run with values and per-engine time.

Both API generations share it: ``neuronsim.nki.legacy`` is ``neuronxcc.nki`` (NKI 0.1, the
public nki-samples tutorials), ``neuronsim.nki.current`` is the ``nki`` package (0.3+,
destination-first ISA calls). Those import names resolve here (``_neuronsim_names``). docs/nki.md
is the guide.
"""

from neuronsim.nki.errors import NkiError

__all__ = ["NkiError"]
