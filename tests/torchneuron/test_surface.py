"""Each name of TorchNeuron's public surface (surface.py) through the installed package: it
exists and has TorchNeuron's signature. Run by tools/test_wheel.sh in a venv holding only torch,
numpy, pytest and the neuronsim wheel, with nothing imported before ``import torch_neuronx``."""

import importlib
import inspect
import sys

import pytest
import torch_neuronx  # first: nothing of neuronsim is imported before it
from surface import METHODS, NOT_MODELLED, SURFACE

CASES = [(module, name) for module, names in SURFACE.items() for name in names]
NKI = ("nki_op", "wrap_nki")


def _nki_available() -> bool:
    try:
        importlib.import_module("neuronsim.nki.torch_ops")
    except ImportError:
        return False
    return True


def _params(spec: str) -> list[inspect.Parameter]:
    namespace: dict = {}
    exec(f"def f{spec}: pass", namespace)  # noqa: S102 - a signature from surface.py
    return list(inspect.signature(namespace["f"]).parameters.values())


def _ours(obj) -> list[inspect.Parameter]:
    params = list(inspect.signature(obj).parameters.values())
    return [p.replace(annotation=inspect.Parameter.empty) for p in params]


POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _mismatch(theirs: list[inspect.Parameter], ours: list[inspect.Parameter]) -> str | None:
    """Why a call TorchNeuron accepts would not be accepted the same way here, or None."""
    by_name = {p.name: p for p in ours}
    our_positional = [p.name for p in ours if p.kind in POSITIONAL]
    for i, p in enumerate(q for q in theirs if q.kind in POSITIONAL):
        if i >= len(our_positional) or our_positional[i] != p.name:
            return f"positional parameter {i} is {p.name!r} on TorchNeuron, {our_positional}"
    for p in theirs:
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            if not any(q.kind is p.kind for q in ours):
                return "TorchNeuron takes **kwargs"
            continue
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            if not any(q.kind is p.kind for q in ours):
                return "TorchNeuron takes *args"
            continue
        q = by_name.get(p.name)
        if q is None:
            return f"no parameter {p.name!r}"
        if p.default is not inspect.Parameter.empty and q.default != p.default:
            return f"{p.name!r} defaults to {q.default!r}, TorchNeuron's to {p.default!r}"
    names = {p.name for p in theirs}
    for q in ours:
        extra = q.name not in names and q.kind not in (
            inspect.Parameter.VAR_KEYWORD,
            inspect.Parameter.VAR_POSITIONAL,
        )
        if extra and q.default is inspect.Parameter.empty:
            return f"{q.name!r} is required here and not a TorchNeuron parameter"
    return None


def test_import_torch_neuronx_imported_nothing_of_the_test_first():
    # The process imported pytest, then torch_neuronx; neuronsim came in through it.
    assert "torch_neuronx" in sys.modules and "neuronsim" in sys.modules
    assert torch_neuronx.__version__.endswith("+neuronsim")


@pytest.mark.parametrize("module, name", CASES, ids=[f"{m}.{n}" for m, n in CASES])
def test_name_exists_with_torchneurons_signature(module, name):
    spec = SURFACE[module][name]
    mod = importlib.import_module(module)
    if module == "torch_neuronx" and name in NKI and not _nki_available():
        # Until neuronsim's NKI front end is in the build: a clear error, not a missing name.
        with pytest.raises(AttributeError, match="NKI kernels called from PyTorch"):
            getattr(mod, name)
        return
    assert hasattr(mod, name), f"{module}.{name} is missing"
    obj = getattr(mod, name)
    if spec == "module":
        assert inspect.ismodule(obj)
    elif spec == "class":
        assert inspect.isclass(obj)
    elif spec == "value":
        assert not callable(obj) or isinstance(obj, type)
    else:
        assert callable(obj)
        why = _mismatch(_params(spec), _ours(obj))
        assert (
            why is None
        ), f"{module}.{name}{inspect.signature(obj)} vs TorchNeuron's {spec}: {why}"


@pytest.mark.parametrize("cls, method", [(k, m) for k, ms in METHODS.items() for m in ms])
def test_class_methods_exist(cls, method):
    module, name = cls
    assert hasattr(getattr(importlib.import_module(module), name), method)


def test_torch_neuron_is_torch_neuronx_neuron():
    import torch

    assert torch.neuron is torch_neuronx.neuron


@pytest.mark.parametrize("module", NOT_MODELLED)
def test_runtime_internals_say_they_are_not_modelled(module):
    with pytest.raises(ImportError, match="neuronsim does not model"):
        importlib.import_module(module)


def test_runtime_bindings_say_they_are_not_modelled():
    assert not hasattr(torch_neuronx._C, "_nrt_copy_neuron_to_cpu_tensor")
    with pytest.raises(AttributeError, match="neuronsim does not model"):
        torch_neuronx._C._nrt_load  # noqa: B018
