"""torch.compile on the neuron device: registration with dynamo.

``torch.compile(model, backend="neuron")`` uses the neuron graph compiler
(``neuronsim.torch_compile``). Plain ``torch.compile(model)`` (Inductor, the default backend) routes
graphs on neuron tensors to the same compiler, as TorchNeuron does: Inductor has no code
generator for the device. Other graphs still go to Inductor."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

import torch


def neuron_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """The dynamo backend ``neuron`` (imported lazily: it pulls in dynamo and AOT autograd)."""
    from neuronsim.torch_compile import neuron_backend as backend

    return backend(gm, example_inputs, **kwargs)


def _on_neuron(gm, example_inputs) -> bool:
    for x in example_inputs:
        if isinstance(x, torch.Tensor) and x.device.type == "neuron":
            return True
    for n in getattr(getattr(gm, "graph", None), "nodes", ()):
        val = n.meta.get("example_value", n.meta.get("val"))
        if isinstance(val, torch.Tensor) and val.device.type == "neuron":
            return True
    return False


def _route_default_compile() -> None:
    """Makes Inductor's torch.compile entry hand graphs on neuron tensors to the neuron
    compiler (its mode/options are Inductor's and do not apply there)."""
    wrapper = getattr(torch, "_TorchCompileInductorWrapper", None)
    if wrapper is None or getattr(wrapper.__call__, "_neuron_routed", False):
        return
    inductor_call = wrapper.__call__

    def __call__(self, model_, inputs_, *args, **kwargs):
        if _on_neuron(model_, inputs_):
            return neuron_backend(model_, inputs_)
        return inductor_call(self, model_, inputs_, *args, **kwargs)

    __call__._neuron_routed = True
    wrapper.__call__ = __call__


def _register_with_dynamo() -> None:
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend
    from torch._dynamo.device_interface import register_interface_for_device

    if "neuron" not in _COMPILER_FNS:
        register_backend(compiler_fn=neuron_backend, name="neuron")
    register_interface_for_device("neuron", _neuron_interface())
    _route_default_compile()
    # Before dynamo's first trace: its fake tensors cache what a layer norm returns.
    from neuronsim.torch_compile import layer_norm_stats

    layer_norm_stats.install()


class _DynamoImportHook(importlib.abc.MetaPathFinder):
    """Registers with dynamo right after ``torch._dynamo.device_interface`` is first imported:
    importing dynamo eagerly would add about a second to ``import neuronsim``."""

    _target = "torch._dynamo.device_interface"

    def find_spec(self, name, path, target=None):
        if name != self._target:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_register(module):
            exec_module(module)
            sys.modules[name] = module
            _register_with_dynamo()

        spec.loader.exec_module = exec_and_register
        return spec


def register() -> None:
    """Registers the ``neuron`` compile backend and device interface, now if dynamo is already
    loaded, otherwise as soon as it is."""
    if _DynamoImportHook._target in sys.modules:
        _register_with_dynamo()
    elif not any(isinstance(f, _DynamoImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _DynamoImportHook())


def _neuron_interface():
    from torch._dynamo.device_interface import DeviceInterface

    from neuronsim import device_module as dm

    class NeuronInterface(DeviceInterface):
        class Worker:
            @staticmethod
            def set_device(device: int):
                dm.set_device(device)

            @staticmethod
            def current_device() -> int:
                return dm.current_device()

            @staticmethod
            def get_device_properties(device=None):
                return dm.get_device_properties(device)

        current_device = staticmethod(dm.current_device)
        set_device = staticmethod(dm.set_device)
        device_count = staticmethod(dm.device_count)
        is_available = staticmethod(dm.is_available)
        synchronize = staticmethod(dm.synchronize)
        get_device_properties = staticmethod(dm.get_device_properties)
        Stream = dm.Stream
        Event = dm.Event
        current_stream = staticmethod(dm.current_stream)
        set_stream = staticmethod(dm.set_stream)

        @staticmethod
        def exchange_device(device: int) -> int:
            prev = dm.current_device()
            dm.set_device(device)
            return prev

        @staticmethod
        def maybe_exchange_device(device: int) -> int:
            return NeuronInterface.exchange_device(device) if device >= 0 else dm.current_device()

        @staticmethod
        def get_raw_stream(device_index: int) -> int:
            return 0

        @staticmethod
        def get_compute_capability(device=None):
            return "neuron"

    return NeuronInterface
