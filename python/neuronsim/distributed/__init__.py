"""torch.distributed on simulated NeuronCores: the ``neuron`` c10d backend.

``import neuronsim`` registers it the way TorchNeuron registers its own
(``torch.distributed.Backend.register_backend("neuron", ..., devices=["neuron"])``), so
``init_process_group("neuron")``, ``init_process_group()`` with neuron tensors,
``"cpu:gloo,neuron:neuron"`` and ``init_device_mesh("neuron", ...)`` pick it. Each rank is a
process with its own simulated NeuronCore (``NEURON_RT_VISIBLE_CORES`` = its local rank, as the
Neuron runtime does); data moves through a Gloo group the backend owns, time comes from the
collective model (see docs/distributed.md).
"""

from neuronsim.distributed._backend import register
from neuronsim.distributed._placement import RankPlacement, this_rank

__all__ = ["RankPlacement", "register", "this_rank"]
