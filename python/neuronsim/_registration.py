"""Registers the ``neuron`` device with PyTorch: the PrivateUse1 rename, ``torch.neuron``, the
generated ``Tensor.neuron()``/``Module.neuron()``/``Storage.neuron()`` methods, and the dynamo
backend and device interface."""

import torch

from neuronsim import _C

_done = False


def register() -> None:
    global _done
    if _done:
        return
    name = torch._C._get_privateuse1_backend_name()
    if name != "neuron":
        if name != "privateuseone":
            raise RuntimeError(
                f"PrivateUse1 is already registered as '{name}'; neuronsim needs it as 'neuron'"
            )
        torch.utils.rename_privateuse1_backend("neuron")
    _C._init()
    from neuronsim import device_module

    if not hasattr(torch, "neuron"):
        torch._register_device_module("neuron", device_module)
    if not hasattr(torch.Tensor, "neuron"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_storage=True
        )
    from neuronsim import _autograd_exit, _compile, _dtensor_rng, _fast_paths, distributed

    _fast_paths.register()
    _compile.register()
    distributed.register()
    _dtensor_rng.install()
    _autograd_exit.install()
    _done = True
    _warn_if_torch_neuronx_is_not_ours()


def _warn_if_torch_neuronx_is_not_ours() -> None:
    # accelerate and transformers import torch_neuronx when they find it: it must be this one.
    import warnings

    from neuronsim import _coexistence

    conflict = _coexistence.conflict()
    if conflict is not None:
        warnings.warn(f"neuronsim: {conflict}", RuntimeWarning, stacklevel=3)
