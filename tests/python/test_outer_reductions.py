"""Reductions over outer dims (x.amax(0), x.var(0), a middle dim, two non-adjacent dims) run
natively and, in ISA mode (the programs computing the values on the simulated engines), match
the CPU: max/min/prod/amax/amin, the values of max.dim/min.dim, and var/std/var_mean/std_mean
with correction 0 and 1 and keepdim, in float32 and bfloat16, over odd sizes. The kernels load
contiguous rows and transpose them on TensorE (docs/design.md, "Known gaps"); the simulated time
of the 300 x 1100 case is in tests/cpp/reduction_kernel_test.cpp (CostModelRules).
"""

import neuronsim
import pytest
import torch
from neuronsim import _C

OPS = {
    "amax": lambda x, d, k: x.amax(d, keepdim=k),
    "amin": lambda x, d, k: x.amin(d, keepdim=k),
    "max_values": lambda x, d, k: x.max(d[0], keepdim=k).values if len(d) == 1 else x.amax(d),
    "min_values": lambda x, d, k: x.min(d[0], keepdim=k).values if len(d) == 1 else x.amin(d),
    "prod": lambda x, d, k: x.prod(d[0], keepdim=k),
    "var": lambda x, d, k: x.var(d, keepdim=k),
    "var_c0": lambda x, d, k: x.var(d, correction=0, keepdim=k),
    "std": lambda x, d, k: x.std(d, keepdim=k),
    "std_c0": lambda x, d, k: x.std(d, correction=0, keepdim=k),
    "var_mean": lambda x, d, k: torch.var_mean(x, d, keepdim=k),
    "std_mean": lambda x, d, k: torch.std_mean(x, d, correction=0, keepdim=k),
}
# (shape, reduced dims): wide rows (two groups of row slices), a middle dim of narrow rows (rows
# side by side on partitions), three columns, two non-adjacent dims, few rows.
SHAPES = [
    ((300, 1100), (0,)),
    ((7, 200, 33), (1,)),
    ((5000, 3), (0,)),
    ((4, 50, 3, 40), (0, 2)),
    ((3, 16, 257), (1,)),
    ((2, 5), (0,)),
]
TOL = {torch.float32: {"rtol": 2e-5, "atol": 2e-5}, torch.bfloat16: {"rtol": 1e-2, "atol": 1e-2}}


def _isa(fn):
    _C._set_isa_mode(True)
    try:
        neuronsim.clear_op_tracking()
        out = fn()
        out = out if isinstance(out, tuple) else (out,)
        return [t.cpu() for t in out]
    finally:
        _C._set_isa_mode(False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("keepdim", [False, True], ids=["drop", "keep"])
@pytest.mark.parametrize("shape,dims", SHAPES, ids=str)
@pytest.mark.parametrize("op", sorted(OPS))
def test_outer_dim_reduction_matches_cpu_in_isa_mode(op, shape, dims, keepdim, dtype):
    if op == "prod" and len(dims) > 1:
        pytest.skip("prod takes one dim")
    torch.manual_seed(0)
    x = (torch.randn(shape) * 2 + 3).to(dtype)
    if op == "prod":  # factors near 1: a finite product over hundreds of rows
        x = (1 + 0.02 * torch.randn(shape)).to(dtype)
    fn = OPS[op]
    # The CPU's bf16 prod over dim 0 rounds every partial product to bf16 (10% off after 300
    # rows); the device folds in fp32, as the CPU does for float32 input.
    ref_x = x.float() if op == "prod" else x
    expected = fn(ref_x, dims, keepdim)
    expected = tuple(
        t.to(dtype) for t in (expected if isinstance(expected, tuple) else (expected,))
    )
    xd = x.to("neuron")
    got = _isa(lambda: fn(xd, dims, keepdim))
    assert not neuronsim.get_fallback_ops(), neuronsim.get_fallback_ops()
    for e, a in zip(expected, got, strict=True):
        assert a.shape == e.shape and a.dtype == e.dtype
        torch.testing.assert_close(a, e, **TOL[dtype])


def test_outer_dim_max_propagates_nan_and_inf():
    x = torch.randn(300, 140)
    x[17, 5] = float("nan")
    x[200, 9] = float("inf")
    x[:, 11] = -float("inf")
    xd = x.to("neuron")
    for fn in (lambda t: t.amax(0), lambda t: t.amin(0), lambda t: t.var(0)):
        (got,) = _isa(lambda f=fn: f(xd))
        torch.testing.assert_close(got, fn(x), equal_nan=True)


def test_outer_dim_inf_norm_takes_abs():
    """vector_norm(ord=inf) over dim 0 folds |x|, not x."""
    x = torch.randn(300, 140) - 5
    (got,) = _isa(lambda: torch.linalg.vector_norm(x.to("neuron"), float("inf"), 0))
    torch.testing.assert_close(got, torch.linalg.vector_norm(x, float("inf"), 0))
