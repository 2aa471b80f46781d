"""neuronsim's stand-in for TorchNeuron's ``torch_neuronx`` package.

Code written for Trainium starts with ``import torch_neuronx`` ("registers the Neuron device
and distributed backend"), and libraries look for the package to decide that a Neuron device is
present (accelerate's ``is_neuron_available``, transformers' ``is_torch_neuron_available``). With
neuronsim installed, that import registers the simulated ``neuron`` device and the ``neuron``
c10d backend, so such programs run unchanged on an x86 machine. It is not TorchNeuron: only what
neuronsim implements is here.
"""

import neuronsim as _neuronsim

simulator = _neuronsim
__all__ = ["simulator"]
