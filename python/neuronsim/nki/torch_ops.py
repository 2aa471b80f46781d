"""NKI kernels as PyTorch operators, as TorchNeuron registers them: ``nki_op`` (a
``torch.library.custom_op`` whose fake implementation is the function itself, so it works under
``torch.compile`` as one graph node and trains through ``register_autograd``) and ``wrap_nki``
(calls an ``@nki.jit`` kernel on ``neuron`` tensors, ``[grid]`` included).

Usage (TorchNeuron's pattern)::

    @nki_op("mylib::rmsnorm", mutates_args=())
    def rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        wrap_nki(rmsnorm_kernel)(x, w, out)
        return out

    rmsnorm.register_autograd(backward, setup_context=setup_context)

The kernel reads and writes the tensors' device memory directly: on ``neuron`` tensors it runs
on the simulated NeuronCore (values and time, in eager mode; inside a compiled graph its program
joins the graph's launch). Under fake tensors (tracing, ``register_fake``) it does nothing.
"""

import torch

_NKI_OPS: set = set()


def is_nki_op(qualname: str) -> bool:
    """Whether an operator ("ns::name") was registered by nki_op (the graph compiler runs it as
    an eager node inside its launch)."""
    return qualname in _NKI_OPS


def _is_fake(x) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(x, FakeTensor) or (isinstance(x, torch.Tensor) and x.device.type == "meta")


class NKIHOPCaller:
    """``wrap_nki(kernel)``: calls the kernel on torch tensors; ``[grid]`` launches a grid."""

    def __init__(self, kernel, grid=()):
        from neuronsim.nki import _jit

        if not isinstance(kernel, _jit.Kernel):
            kernel = _jit.Kernel(kernel, "legacy")
        self.kernel = kernel
        self.grid = grid

    def __getitem__(self, grid):
        return NKIHOPCaller(self.kernel, grid if isinstance(grid, tuple) else (grid,))

    def __call__(self, *args, **kwargs):
        from neuronsim.nki import _jit

        kernel = self.kernel[self.grid] if self.grid else self.kernel
        tensors = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
        if any(_is_fake(t) for t in tensors):
            return _fake_outputs(kernel, args, kwargs)
        args = [
            a.contiguous() if isinstance(a, torch.Tensor) and not a.is_contiguous() else a
            for a in args
        ]
        outputs, _ = _jit.run(kernel, args, kwargs, full=True)
        return outputs


def _fake_outputs(kernel, args, kwargs):
    """Shapes of what the kernel returns, from a trace with placeholders (nothing runs)."""
    from neuronsim.nki import _jit, _trace

    def ph(a):
        return _jit.Placeholder(a.shape, a.dtype) if isinstance(a, torch.Tensor) else a

    result = _jit.trace_only(kernel, [ph(a) for a in args], {k: ph(v) for k, v in kwargs.items()})
    device = next(a.device for a in args if isinstance(a, torch.Tensor))

    def one(x):
        if x is None or not hasattr(x, "buf"):
            return x
        from neuronsim.nki._dtypes import as_dtype

        dt = {"bfloat16": torch.bfloat16}.get(
            str(as_dtype(x.dtype)), getattr(torch, str(as_dtype(x.dtype)), None)
        )
        return torch.empty(x.shape, dtype=dt, device=device)

    del _trace
    if isinstance(result, tuple):
        return tuple(one(x) for x in result)
    return one(result)


def wrap_nki(nki_kernel, **kwargs):
    """The kernel as a PyTorch callable (``wrap_nki(kernel)[grid](*tensors)``), TorchNeuron's
    signature; its compiler options (keyword arguments) have no meaning here and are refused."""
    if kwargs:
        raise TypeError(
            f"wrap_nki: neuronsim does not model the options {sorted(kwargs)} "
            "(they configure the Neuron compiler)"
        )
    return NKIHOPCaller(nki_kernel)


def nki_op(name, fn=None, mutates_args={}, *, schema=None, device_types=None):  # noqa: B006
    # mutates_args={} as TorchNeuron's signature has it (never mutated here).
    """Registers `fn` (which calls ``wrap_nki(kernel)``) as the custom operator `name`; the
    result is a ``torch.library.custom_op`` (``register_autograd`` and ``register_fake``
    available)."""

    def register(f):
        op = torch.library.custom_op(
            name, f, mutates_args=mutates_args, schema=schema, device_types=device_types
        )
        op.register_fake(f)
        _NKI_OPS.add(name)
        return op

    if fn is not None:
        return register(fn)
    return register


__all__ = ["nki_op", "wrap_nki", "NKIHOPCaller", "is_nki_op"]
