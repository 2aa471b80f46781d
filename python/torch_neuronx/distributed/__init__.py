"""``torch_neuronx.distributed``: importing it registers the ``neuron`` c10d backend, as
TorchNeuron's does (``init_process_group("neuron")``, ``init_device_mesh("neuron", ...)``).
neuronsim registers it when the device registers; see docs/distributed.md."""

from neuronsim.distributed import register as _register

_register()
