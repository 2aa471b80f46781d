"""A traced layer norm's statistics in the dtype the device gives them.

PyTorch's fake (and meta) native_layer_norm returns mean and rstd in the input's dtype on the
CPU but in float32 on every other device (CUDA's convention). The neuron device follows the
CPU: its eager kernel, like the CPU's, returns a bf16 layer norm's statistics in bf16. Without
this, a compiled graph would record float32 statistics the device never holds, and a bf16
layer norm's backward would read them in another dtype than eager mode does."""

from __future__ import annotations

import torch

_installed = False


def install() -> None:
    """Wraps FakeTensorMode's native_layer_norm rule so that on neuron tensors mean and rstd take
    the input's dtype, as on the CPU. Idempotent."""
    global _installed  # noqa: PLW0603
    if _installed:
        return
    from torch._subclasses import fake_impls

    op = torch.ops.aten.native_layer_norm.default
    base = fake_impls.op_implementations_dict.get(op)
    if base is None:
        raise RuntimeError(
            "neuronsim.compile: this PyTorch has no fake rule for aten.native_layer_norm; "
            "the neuron device cannot give its statistics the CPU's dtype"
        )

    def native_layer_norm_fake(fake_mode, func, *args, **kwargs):
        out, mean, rstd = base(fake_mode, func, *args, **kwargs)
        x = args[0] if args else kwargs["input"]
        if x.device.type == "neuron" and mean.dtype != x.dtype:
            with fake_mode:
                mean, rstd = mean.to(x.dtype), rstd.to(x.dtype)
        return out, mean, rstd

    fake_impls.op_implementations_dict[op] = native_layer_norm_fake
    _installed = True
