"""nansum and nanmean (TRL's GRPO averages masked losses with them) run natively: nansum is the
library reduction with NaN read as zero, nanmean that sum over the count of non-NaN elements.
Over every dim and over one dim, with keepdim, in float32 and bfloat16, in fast mode and in ISA
mode (the programs computing the values), they match the CPU and take no CPU fallback.
"""

import neuronsim
import pytest
import torch
from neuronsim import _C

# nanmean's count of non-NaN elements is an int64 sum: ISA mode keeps its host values.
ISA_HOST = {"aten::sum.dim_IntList": "host values (64-bit data)"}
TOL = {torch.float32: {"rtol": 1e-5, "atol": 1e-5}, torch.bfloat16: {"rtol": 2e-2, "atol": 2e-2}}
DIMS = [None, 0, 1, 2, -1, (0, 2)]


def _with_nans(shape, dtype, seed):
    torch.manual_seed(seed)
    x = torch.randn(shape) * 4
    x[torch.rand(shape) < 0.3] = float("nan")
    x[0, 0] = float("nan")  # a row of NaN only: nansum 0, nanmean NaN
    return x.to(dtype)


def _reduce(fn, x, dim, keepdim):
    return fn(x) if dim is None else fn(x, dim=dim, keepdim=keepdim)


@pytest.mark.parametrize("isa", [False, True], ids=["fast", "isa"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("fn", [torch.nansum, torch.nanmean], ids=lambda f: f.__name__)
def test_nan_reductions_match_cpu_natively(fn, dtype, isa):
    x = _with_nans((5, 7, 33), dtype, 0)
    try:
        _C._set_isa_mode(isa)
        neuronsim.clear_op_tracking()
        for dim in DIMS:
            for keepdim in (False, True) if dim is not None else (False,):
                got = _reduce(fn, x.to("neuron"), dim, keepdim)
                expected = _reduce(fn, x, dim, keepdim)
                assert got.dtype == expected.dtype and got.shape == expected.shape
                torch.testing.assert_close(got.cpu(), expected, equal_nan=True, **TOL[dtype])
    finally:
        _C._set_isa_mode(False)
    assert not neuronsim.get_fallback_ops()
    assert "aten::nansum" in neuronsim.get_executed_ops()
    if isa:
        assert dict(_C._isa_host_ops()) == (ISA_HOST if fn is torch.nanmean else {})


def test_nansum_without_nan_equals_sum_and_grpo_style_mean():
    """No NaN: nansum is sum. GRPO's masked mean (NaN where masked) equals the CPU's."""
    torch.manual_seed(1)
    x = torch.randn(64, 128)
    torch.testing.assert_close(torch.nansum(x.to("neuron"), 1).cpu(), x.sum(1))
    mask = torch.rand(64, 128) < 0.6
    loss = torch.where(mask, x, torch.tensor(float("nan")))
    neuronsim.clear_op_tracking()
    got = torch.nanmean(loss.to("neuron"), dim=-1).nanmean()
    torch.testing.assert_close(got.cpu(), torch.nanmean(loss, dim=-1).nanmean())
    assert not neuronsim.get_fallback_ops()
