"""``torch.compile(backend="neuron")``: captured graphs (forward and, through AOT autograd,
backward) run with the device's eager kernels, so results and simulated time match eager mode.
Fusion into larger kernels is not done yet; graphs and nodes are counted (``compile_stats``)."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

import torch

from neuronsim import _api


def _make_compiler(kind: str):
    def compiler(gm: torch.fx.GraphModule, example_inputs):
        from torch._functorch.aot_autograd import make_boxed_func

        _api._compile_counts["backward_graphs" if kind == "backward" else "graphs"] += 1
        _api._compile_counts["nodes"] += sum(1 for n in gm.graph.nodes if n.op == "call_function")
        # AOT autograd calls compiled graphs with one boxed list of arguments (so it can free
        # them early); an unboxed function makes it warn and adapt on every call.
        return make_boxed_func(gm.forward)

    return compiler


_backend = None


def neuron_backend(gm: torch.fx.GraphModule, example_inputs):
    """The dynamo backend: AOT autograd around the device's eager kernels (built on first use)."""
    global _backend  # noqa: PLW0603
    if _backend is None:
        from torch._dynamo.backends.common import aot_autograd

        _backend = aot_autograd(
            fw_compiler=_make_compiler("forward"), bw_compiler=_make_compiler("backward")
        )
    return _backend(gm, example_inputs)


def _register_with_dynamo() -> None:
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend
    from torch._dynamo.device_interface import register_interface_for_device

    if "neuron" not in _COMPILER_FNS:
        register_backend(compiler_fn=neuron_backend, name="neuron")
    register_interface_for_device("neuron", _neuron_interface())


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
