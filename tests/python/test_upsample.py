"""F.interpolate's nearest (1-d, 2-d, 3-d) and bilinear (2-d, align_corners both ways) modes and
their backwards run natively (upsample_nearest*d, upsample_bilinear2d and their _backward ops,
the kernel library's plane-per-partition programs) and match the CPU, with scale factors and
with sizes (up, down and uneven ratios), in float32 and bfloat16, over more planes than one
partition tile; ISA mode (the programs computing the values) agrees with the host's values.
"""

import neuronsim
import pytest
import torch
import torch.nn.functional as F
from neuronsim import _C

FAMILY = {
    "aten::upsample_nearest1d",
    "aten::upsample_nearest2d",
    "aten::upsample_nearest3d",
    "aten::upsample_bilinear2d",
    "aten::upsample_nearest1d_backward",
    "aten::upsample_nearest2d_backward",
    "aten::upsample_nearest3d_backward",
    "aten::upsample_bilinear2d_backward",
}

# (input shape, interpolate kwargs)
CASES = {
    "nearest1d_x2": ((2, 3, 7), {"scale_factor": 2}),
    "nearest1d_size11": ((2, 3, 7), {"size": 11}),
    "nearest1d_down": ((2, 3, 9), {"size": 4}),
    "nearest1d_x1.7": ((2, 3, 7), {"scale_factor": 1.7}),
    "nearest2d_x2": ((2, 3, 5, 6), {"scale_factor": 2}),
    "nearest2d_size": ((2, 3, 5, 6), {"size": (7, 9)}),
    "nearest2d_x1.5_x3": ((2, 3, 5, 6), {"scale_factor": (1.5, 3)}),
    "nearest2d_down": ((2, 3, 8, 9), {"size": (3, 4)}),
    "nearest2d_150_planes": ((3, 50, 6, 5), {"scale_factor": 2}),
    "nearest3d_x2": ((1, 2, 3, 4, 5), {"scale_factor": 2}),
    "nearest3d_size": ((1, 2, 3, 4, 5), {"size": (5, 6, 7)}),
    "bilinear_x2": ((2, 3, 5, 6), {"scale_factor": 2, "mode": "bilinear"}),
    "bilinear_x2_corners": (
        (2, 3, 5, 6),
        {"scale_factor": 2, "mode": "bilinear", "align_corners": True},
    ),
    "bilinear_size": ((2, 3, 5, 6), {"size": (7, 13), "mode": "bilinear"}),
    "bilinear_size_corners": (
        (2, 3, 5, 6),
        {"size": (7, 13), "mode": "bilinear", "align_corners": True},
    ),
    "bilinear_down": ((2, 3, 9, 8), {"size": (4, 3), "mode": "bilinear"}),
    "bilinear_x1.3": ((2, 3, 5, 6), {"scale_factor": 1.3, "mode": "bilinear"}),
    "bilinear_to_1": ((2, 3, 5, 6), {"size": (1, 4), "mode": "bilinear", "align_corners": True}),
    "bilinear_150_planes": ((3, 50, 6, 5), {"scale_factor": 2, "mode": "bilinear"}),
}
TOL = {torch.float32: {"rtol": 1e-5, "atol": 1e-5}, torch.bfloat16: {"rtol": 2e-2, "atol": 3e-2}}


def _base(ops):
    return {o.split(".")[0] for o in ops}


def _run(shape, kw, dtype, dev):
    torch.manual_seed(0)
    x = torch.randn(shape).to(dtype)
    x = x.to(dev).requires_grad_()
    y = F.interpolate(x, **kw)
    g = torch.randn(y.shape).to(dtype).to(dev)
    y.backward(g)
    return y.detach().cpu(), x.grad.cpu()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_interpolate_matches_cpu_with_gradients(name, dtype):
    shape, kw = CASES[name]
    expected = _run(shape, kw, dtype, "cpu")
    neuronsim.clear_op_tracking()
    got = _run(shape, kw, dtype, "neuron")
    assert not (_base(neuronsim.get_fallback_ops()) & FAMILY), neuronsim.get_fallback_ops()
    ran = _base(neuronsim.get_executed_ops()) & FAMILY
    assert len(ran) == 2, ran  # the forward and its backward, both native
    for e, a in zip(expected, got, strict=True):
        assert a.shape == e.shape
        torch.testing.assert_close(a, e, **TOL[dtype])


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_interpolate_sum_backward_expanded_gradient(mode):
    """loss.sum() hands the backward an expanded (stride-0) gradient: still native."""
    x = torch.randn(2, 3, 5, 6)
    xc, xd = x.clone().requires_grad_(), x.to("neuron").requires_grad_()
    F.interpolate(xc, scale_factor=2, mode=mode).sum().backward()
    neuronsim.clear_op_tracking()
    F.interpolate(xd, scale_factor=2, mode=mode).sum().backward()
    assert not (_base(neuronsim.get_fallback_ops()) & FAMILY), neuronsim.get_fallback_ops()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)


def test_upsample_out_and_channels_last():
    x = torch.randn(2, 3, 4, 5)
    out = torch.empty(2, 3, 8, 10, device="neuron")
    torch._C._nn.upsample_nearest2d(x.to("neuron"), [8, 10], out=out)
    torch.testing.assert_close(out.cpu(), F.interpolate(x, scale_factor=2))
    # channels_last keeps the CPU fallback, with the CPU's values.
    xc = x.to(memory_format=torch.channels_last)
    got = F.interpolate(xc.to("neuron"), scale_factor=2, mode="bilinear")
    torch.testing.assert_close(got.cpu(), F.interpolate(xc, scale_factor=2, mode="bilinear"))


def test_upsample_bad_sizes_raise_a_clear_error():
    # A fixed expectation (PyTorch's shared size check), not whatever the host's kernel says.
    x = torch.randn(2, 3, 4, 5)
    with pytest.raises(RuntimeError, match="Input and output sizes should be greater than 0"):
        torch._C._nn.upsample_nearest2d(x.to("neuron"), [0, 10])


@pytest.mark.parametrize(
    "name",
    [
        "nearest1d_x1.7",
        "nearest2d_size",
        "nearest3d_size",
        "bilinear_size",
        "bilinear_x2_corners",
        "bilinear_down",
        "nearest2d_150_planes",
    ],
)
def test_interpolate_isa_mode_agrees_with_fast_mode(name):
    shape, kw = CASES[name]
    try:
        _C._set_isa_mode(False)
        fast = _run(shape, kw, torch.float32, "neuron")
        _C._set_isa_mode(True)
        neuronsim.clear_op_tracking()
        isa = _run(shape, kw, torch.float32, "neuron")
    finally:
        _C._set_isa_mode(False)
    assert not (_base(neuronsim.get_fallback_ops()) & FAMILY)
    assert not (_base(dict(_C._isa_host_ops())) & FAMILY)
    for f, i in zip(fast, isa, strict=True):
        scale = max(f.abs().max().item(), 1.0)
        assert (f - i).abs().max().item() <= 1e-5 * scale, name


@pytest.mark.parametrize("isa", [False, True])
@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_channel_slices_run_native(mode, isa):
    """A UNet's skip connection: the upsampled map is concatenated, so its gradient is a channel
    slice of cat's (planes not one stride apart); the input a slice of a larger map."""
    torch.manual_seed(0)
    base = torch.randn(3, 200, 6, 7)
    g = torch.randn(3, 205, 12, 14)
    want_x = base[:, 3:170].clone().requires_grad_()
    want_y = F.interpolate(want_x, scale_factor=2, mode=mode)
    (torch.cat([want_y, torch.zeros(3, 38, 12, 14)], 1) * g).sum().backward()
    _C._set_isa_mode(isa)
    try:
        neuronsim.clear_op_tracking()
        x = base.to("neuron")[:, 3:170].requires_grad_()
        y = F.interpolate(x, scale_factor=2, mode=mode)
        z = torch.cat([y, torch.zeros(3, 38, 12, 14, device="neuron")], 1)
        (z * g.to("neuron")).sum().backward()
        assert not neuronsim.get_fallback_ops()
    finally:
        _C._set_isa_mode(False)
    torch.testing.assert_close(y.detach().cpu(), want_y.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(x.grad.cpu(), want_x.grad, rtol=1e-5, atol=1e-5)
