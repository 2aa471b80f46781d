"""``torch_neuronx.neuron`` is ``torch.neuron``, as in TorchNeuron (whose ``torch.neuron`` is this
module): neuronsim's device module, with TorchNeuron's names (see neuronsim/device_module.py)."""

import sys

from neuronsim import device_module

sys.modules[__name__] = device_module
