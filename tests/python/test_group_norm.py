"""Group norm runs natively (native_group_norm and native_group_norm_backward, the kernel
library's rows-(n, g)-on-partitions programs) and matches the CPU: outputs, the saved mean and
rstd, and the input, weight and bias gradients, in float32 and bfloat16, with and without affine
parameters, over 1-d to 3-d feature maps, several row tiles, and rows that stream through SBUF
in chunks; channels-last inputs (what convolutions and Diffusers' blocks hand over) too, each
data tensor in either layout. Then nn.GroupNorm in a small conv net trains on the device as on
the CPU, and ISA mode (the programs computing the values) agrees with the host's values.
"""

import copy

import neuronsim
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from neuronsim import _C

FAMILY = {"aten::native_group_norm", "aten::native_group_norm_backward"}

# (shape, groups): 1-d, 2-d and 3-d maps; one group; one channel per group; 70 images of two
# groups (two row tiles); rows of 3 x 4096 columns (whole channels per chunk) and of one
# 16,900-column channel (parts of a channel per chunk).
SHAPES = [
    ((3, 8, 7), 2),
    ((2, 6, 5, 5), 3),
    ((2, 4, 3, 4, 5), 4),
    ((2, 6, 5, 5), 1),
    ((2, 6, 3, 3), 6),
    ((70, 4, 3, 3), 2),
    ((2, 6, 64, 64), 2),
    ((1, 2, 130, 130), 2),
]
TOL = {torch.float32: {"rtol": 1e-5, "atol": 1e-5}, torch.bfloat16: {"rtol": 2e-2, "atol": 2e-2}}


def _fallbacks():
    return {o.split(".")[0] for o in neuronsim.get_fallback_ops()}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
@pytest.mark.parametrize("shape,groups", SHAPES, ids=lambda v: str(v))
def test_group_norm_matches_cpu_with_gradients(shape, groups, affine, dtype):
    torch.manual_seed(0)
    x = (torch.randn(shape) * 3 + 1).to(dtype)
    C = shape[1]
    w = (torch.rand(C) + 0.5).to(dtype) if affine else None
    b = torch.randn(C).to(dtype) if affine else None
    g = torch.randn(shape).to(dtype)

    def run(dev):
        leaves = [t.detach().to(dev).requires_grad_() if t is not None else None for t in (x, w, b)]
        y = F.group_norm(leaves[0], groups, leaves[1], leaves[2], eps=1e-4)
        y.backward(g.to(dev))
        return [y] + [t.grad for t in leaves if t is not None]

    expected = run("cpu")
    neuronsim.clear_op_tracking()
    got = run("neuron")
    assert not (_fallbacks() & FAMILY), neuronsim.get_fallback_ops()
    assert FAMILY <= {o.split(".")[0] for o in neuronsim.get_executed_ops()}
    for e, a in zip(expected, got, strict=True):
        torch.testing.assert_close(a.cpu(), e, **TOL[dtype])


def test_native_group_norm_saved_statistics_and_output_mask():
    torch.manual_seed(1)
    x, w, b = torch.randn(3, 6, 4, 4), torch.rand(6) + 0.5, torch.randn(6)
    N, C, HxW, G, eps = 3, 6, 16, 3, 1e-5
    cpu = torch.native_group_norm(x, w, b, N, C, HxW, G, eps)
    dev = torch.native_group_norm(x.to("neuron"), w.to("neuron"), b.to("neuron"), N, C, HxW, G, eps)
    for e, a in zip(cpu, dev, strict=True):
        torch.testing.assert_close(a.cpu(), e)
    gy = torch.randn_like(x)
    for mask in ([True, False, True], [False, True, False], [True, True, True]):
        e = torch.ops.aten.native_group_norm_backward(gy, x, cpu[1], cpu[2], w, N, C, HxW, G, mask)
        neuronsim.clear_op_tracking()
        a = torch.ops.aten.native_group_norm_backward(
            gy.to("neuron"), x.to("neuron"), dev[1], dev[2], w.to("neuron"), N, C, HxW, G, mask
        )
        assert not neuronsim.get_fallback_ops()
        for et, at in zip(e, a, strict=True):
            assert (et is None) == (at is None)
            if et is not None:
                torch.testing.assert_close(at.cpu(), et)


# (C, H = W, groups) of the channels-last cases: N = 2.
CL_CASES = [(8, 4, 2), (8, 8, 8), (32, 4, 4), (32, 8, 8), (32, 8, 2)]
CL = torch.channels_last


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
@pytest.mark.parametrize("C,HW,groups", CL_CASES, ids=lambda v: str(v))
def test_group_norm_channels_last_runs_native(C, HW, groups, affine, dtype):
    torch.manual_seed(5)
    x = (torch.randn(2, C, HW, HW) * 3 + 1).to(dtype).to(memory_format=CL)
    w = (torch.rand(C) + 0.5).to(dtype) if affine else None
    b = torch.randn(C).to(dtype) if affine else None
    g = torch.randn(2, C, HW, HW).to(dtype).to(memory_format=CL)

    def run(dev):
        leaves = [t.detach().to(dev).requires_grad_() if t is not None else None for t in (x, w, b)]
        y = F.group_norm(leaves[0], groups, leaves[1], leaves[2], eps=1e-4)
        y.backward(g.to(dev))
        return [y] + [t.grad for t in leaves if t is not None]

    expected = run("cpu")
    neuronsim.clear_op_tracking()
    got = run("neuron")
    assert not neuronsim.get_fallback_ops()
    assert FAMILY <= {o.split(".")[0] for o in neuronsim.get_executed_ops()}
    assert got[0].is_contiguous(memory_format=CL)
    for e, a in zip(expected, got, strict=True):
        torch.testing.assert_close(a.cpu(), e, **TOL[dtype])


# (x layout, grad_out layout, ISA mode). The CPU's backward reads grad_out in the input's layout
# (autograd hands it the two in one layout), so fast mode, whose values are the CPU kernel's, is
# checked on matching layouts; the ISA programs read each tensor in its own layout.
CONTIG = torch.contiguous_format
LAYOUT_CASES = [(CL, CL, False), (CL, CL, True), (CL, CONTIG, True), (CONTIG, CL, True)]


@pytest.mark.parametrize("x_layout,gy_layout,isa", LAYOUT_CASES, ids=str)
def test_native_group_norm_ops_take_channels_last_data(x_layout, gy_layout, isa):
    """Called directly (autograd hands the backward contiguous copies) the forward and backward
    take channels-last data, and in ISA mode each tensor in its own layout."""
    try:
        _C._set_isa_mode(isa)
        _check_group_norm_ops_on_layouts(x_layout, gy_layout)
    finally:
        _C._set_isa_mode(False)
    assert not any(k.split(".")[0] in FAMILY for k in dict(_C._isa_host_ops()))


def _check_group_norm_ops_on_layouts(x_layout, gy_layout):
    torch.manual_seed(6)
    N, C, H, W, G = 2, 32, 8, 8, 4
    x = torch.randn(N, C, H, W).to(memory_format=x_layout)
    gy = torch.randn(N, C, H, W).to(memory_format=gy_layout)
    w, b = torch.rand(C) + 0.5, torch.randn(C)
    cpu = torch.native_group_norm(x, w, b, N, C, H * W, G, 1e-5)
    neuronsim.clear_op_tracking()
    dev = torch.native_group_norm(
        x.to("neuron"), w.to("neuron"), b.to("neuron"), N, C, H * W, G, 1e-5
    )
    for e, a in zip(cpu, dev, strict=True):
        torch.testing.assert_close(a.cpu(), e, rtol=1e-5, atol=1e-5)
    mask = [True, True, True]
    gy_as_x = gy.contiguous(memory_format=x_layout)
    e = torch.ops.aten.native_group_norm_backward(
        gy_as_x, x, cpu[1], cpu[2], w, N, C, H * W, G, mask
    )
    a = torch.ops.aten.native_group_norm_backward(
        gy.to("neuron"), x.to("neuron"), dev[1], dev[2], w.to("neuron"), N, C, H * W, G, mask
    )
    assert not neuronsim.get_fallback_ops()
    assert FAMILY <= {o.split(".")[0] for o in neuronsim.get_executed_ops()}
    for et, at in zip(e, a, strict=True):
        torch.testing.assert_close(at.cpu(), et, rtol=1e-5, atol=1e-5)


def test_group_norm_many_groups_fall_back_correctly():
    """Shapes the kernels do not take (more groups than partitions) still compute the CPU's
    values (fallback)."""
    x = torch.randn(1, 256, 3)
    torch.testing.assert_close(F.group_norm(x.to("neuron"), 256).cpu(), F.group_norm(x, 256))


class GnNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.gn1 = nn.GroupNorm(4, 8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.gn2 = nn.GroupNorm(2, 8, affine=False)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        y = F.relu(self.gn1(self.conv1(x)))
        y = F.relu(self.gn2(self.conv2(y)) + y)
        return self.head(F.adaptive_avg_pool2d(y, 1).flatten(1))


def test_group_norm_conv_net_trains_like_cpu():
    torch.manual_seed(3)
    cpu = GnNet()
    dev = copy.deepcopy(cpu).to("neuron")
    opt_c = torch.optim.SGD(cpu.parameters(), lr=0.1)
    opt_d = torch.optim.SGD(dev.parameters(), lr=0.1)
    x, t = torch.randn(4, 3, 8, 8), torch.tensor([0, 1, 2, 1])
    neuronsim.clear_op_tracking()
    for _ in range(3):
        lc = F.cross_entropy(cpu(x), t)
        ld = F.cross_entropy(dev(x.to("neuron")), t.to("neuron"))
        torch.testing.assert_close(ld.cpu(), lc, rtol=1e-5, atol=1e-6)
        for o, loss in ((opt_c, lc), (opt_d, ld)):
            o.zero_grad()
            loss.backward()
            o.step()
        for pc, pd in zip(cpu.parameters(), dev.parameters(), strict=True):
            torch.testing.assert_close(pd.grad.cpu(), pc.grad, rtol=1e-4, atol=1e-6)
            torch.testing.assert_close(pd.detach().cpu(), pc.detach(), rtol=1e-4, atol=1e-6)
    assert not neuronsim.get_fallback_ops()


def _gn_grads(x, w, b):
    x, w, b = (t.detach().requires_grad_() for t in (x, w, b))
    y = F.group_norm(x, 3, w, b)
    return (y, *torch.autograd.grad((y * y).sum(), (x, w, b)))


@pytest.mark.parametrize("layout", [torch.contiguous_format, CL], ids=["contiguous", "cl"])
@pytest.mark.parametrize(
    "shape", [(2, 6, 11, 10), (1, 6, 140, 140), (50, 6, 2, 3)], ids=["resident", "stream", "tiles"]
)
def test_group_norm_isa_mode_agrees_with_fast_mode(shape, layout):
    torch.manual_seed(4)
    x = (torch.randn(shape) * 2 + 0.5).to(memory_format=layout)
    args = (x, torch.rand(6) + 0.5, torch.randn(6))

    def run():
        out = _gn_grads(*[a.to("neuron") for a in args])
        return [t.detach().cpu() for t in out]

    try:
        _C._set_isa_mode(False)
        fast = run()
        _C._set_isa_mode(True)
        neuronsim.clear_op_tracking()
        isa = run()
    finally:
        _C._set_isa_mode(False)
    assert not (_fallbacks() & FAMILY)
    assert not any(k.split(".")[0] in FAMILY for k in dict(_C._isa_host_ops()))
    for f, i in zip(fast, isa, strict=True):
        scale = max(f.double().abs().max().item(), 1.0)
        assert (f.double() - i.double()).abs().max().item() <= 1e-4 * scale
