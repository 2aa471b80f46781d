"""TorchNeuron's ``Stream`` and ``Event`` (``torch_neuronx.streams``): neuronsim's, where times
are simulated (``Event.elapsed_time`` in simulated milliseconds)."""

from neuronsim.device_module import Event, Stream

__all__ = ["Event", "Stream"]
