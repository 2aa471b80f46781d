"""Convolutions at ImageNet size run natively, forward and backward.

ResNet's stem (7x7, stride 2, padding 3, 3 -> 64 channels) at 224x224 used to take the CPU
fallback for the forward as well as the backward: the support check needs all three programs to
fit SBUF, and the weight-gradient program sized its tiles for 512-channel blocks (four b_t
sub-tiles and a 512 x 49-tap gradient staging tile) whatever the real channel count, so even a
one-row band of a 3-channel image did not fit past ~192 pixels. In fast mode the values come
from ATen on the host (the programs only time); ISA mode makes the programs compute them.
"""

from __future__ import annotations

import copy

import neuronsim
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from neuronsim import _C
from torch.testing import assert_close

CONV_OPS = {"aten::convolution", "aten::convolution_backward"}


def _conv_fwd_bwd(x, w, stride, padding, input_grad, isa=False):
    """conv2d forward and backward on the device; returns (y, grad_w, grad_x) on the CPU and
    the ops that took the CPU fallback."""
    xd = x.to("neuron").requires_grad_(input_grad)
    wd = w.to("neuron").requires_grad_()
    torch.manual_seed(1)
    neuronsim.clear_op_tracking()
    if isa:
        _C._set_isa_mode(True)
    try:
        y = F.conv2d(xd, wd, stride=stride, padding=padding)
        g = torch.randn(y.shape, dtype=y.dtype)
        y.backward(g.to("neuron"))
        out = (y.detach().cpu(), wd.grad.cpu(), xd.grad.cpu() if input_grad else None)
    finally:
        if isa:
            _C._set_isa_mode(False)
    return out, g, neuronsim.get_fallback_ops()


def _cpu_fwd_bwd(x, w, g, stride, padding, input_grad):
    xc = x.clone().requires_grad_(input_grad)
    wc = w.clone().requires_grad_()
    y = F.conv2d(xc, wc, stride=stride, padding=padding)
    y.backward(g)
    return y.detach(), wc.grad, xc.grad if input_grad else None


def _check(x, w, stride, padding, input_grad, tol, isa=False):
    (y, gw, gx), g, fallback = _conv_fwd_bwd(x, w, stride, padding, input_grad, isa)
    assert not (fallback & CONV_OPS), f"convolution took the CPU fallback: {sorted(fallback)}"
    if isa:
        assert not fallback, f"ISA mode took the CPU fallback: {sorted(fallback)}"
    ry, rgw, rgx = _cpu_fwd_bwd(x, w, g, stride, padding, input_grad)
    # Sums of up to N * 112 * 112 products: scale the tolerance by the result's magnitude.
    for name, a, b in (("output", y, ry), ("grad_weight", gw, rgw), ("grad_input", gx, rgx)):
        if b is None:
            continue
        scale = b.abs().max().item()
        assert_close(a.float(), b.float(), rtol=tol, atol=tol * scale, msg=lambda m, n=name: n + m)


def _stem(n, c, size, co=64, dtype=torch.float32):
    torch.manual_seed(0)
    x = torch.randn(n, c, size, size).to(dtype)
    w = (torch.randn(co, c, 7, 7) * 0.1).to(dtype)
    return x, w


@pytest.mark.parametrize("input_grad", [False, True])
def test_stem_conv_224_native(input_grad):
    x, w = _stem(4, 3, 224)
    _check(x, w, 2, 3, input_grad, 1e-5)


@pytest.mark.parametrize(
    "n,c,size,co",
    [
        (8, 3, 256, 64),  # ImageNet crops at 256
        (2, 3, 512, 64),  # a 512x512 image: 256 output rows of 256
        (2, 64, 112, 64),  # 64 channels in: one 64-channel b-block, 49 taps
    ],
)
def test_large_7x7_stride2_native(n, c, size, co):
    x, w = _stem(n, c, size, co)
    _check(x, w, 2, 3, True, 1e-5)


def test_stem_conv_224_bf16_native():
    x, w = _stem(2, 3, 224, dtype=torch.bfloat16)
    _check(x, w, 2, 3, True, 2e-2)


def test_stem_conv_224_isa_mode():
    # The programs compute the values: forward, input and weight gradients at 224x224.
    x, w = _stem(1, 3, 224, co=16)
    _check(x, w, 2, 3, True, 1e-4, isa=True)


@pytest.mark.parametrize(
    "xs,ws,stride,padding,dilation,dtype,tol",
    [
        # 64 channels: taps two at a time on the partitions, the last of each row alone.
        ((2, 64, 28, 28), (16, 64, 7, 7), 2, 3, 1, torch.float32, 1e-4),
        # Dilated taps: replica j is the band shifted by j * dilation.
        ((2, 5, 19, 17), (6, 5, 3, 3), 1, 2, 2, torch.float32, 1e-4),
        # A 1-d convolution: every tap of the kernel in one group.
        ((3, 4, 50), (6, 4, 5), 2, 2, 1, torch.float32, 1e-4),
        ((1, 3, 224, 224), (16, 3, 7, 7), 2, 3, 1, torch.bfloat16, 2e-2),
    ],
)
def test_weight_grad_stacked_taps_isa_mode(xs, ws, stride, padding, dilation, dtype, tol):
    # The weight gradient stacks up to P / channels taps along the innermost kernel axis on the
    # partitions (one transpose and matmul for several taps); ISA mode checks its values.
    torch.manual_seed(0)
    x = torch.randn(xs).to(dtype)
    w = (torch.randn(ws) * 0.1).to(dtype)
    conv = F.conv1d if len(xs) == 3 else F.conv2d
    xd = x.to("neuron").requires_grad_()
    wd = w.to("neuron").requires_grad_()
    neuronsim.clear_op_tracking()
    _C._set_isa_mode(True)
    try:
        y = conv(xd, wd, stride=stride, padding=padding, dilation=dilation)
        g = torch.randn(y.shape).to(dtype)
        y.backward(g.to("neuron"))
        got = [y.detach().cpu(), wd.grad.cpu(), xd.grad.cpu()]
    finally:
        _C._set_isa_mode(False)
    assert not neuronsim.get_fallback_ops(), sorted(neuronsim.get_fallback_ops())
    xc = x.float().requires_grad_()
    wc = w.float().requires_grad_()
    yc = conv(xc, wc, stride=stride, padding=padding, dilation=dilation)
    yc.backward(g.float())
    for name, a, b in (
        ("output", got[0], yc.detach()),
        ("grad_weight", got[1], wc.grad),
        ("grad_input", got[2], xc.grad),
    ):
        scale = b.abs().max().item()
        assert_close(a.float(), b, rtol=tol, atol=tol * scale, msg=lambda m, n=name: n + m)


@pytest.mark.parametrize(
    "xs,ws,stride,padding,dilation,dtype,tol",
    [
        # One output row of these does not fit SBUF: rows split into column tiles (forward,
        # input and weight gradients). fp32 stem past ~1680 pixels, bf16 past ~3300.
        ((1, 3, 9, 2000), (8, 3, 7, 7), 2, 3, 1, torch.float32, 1e-4),
        ((1, 3, 6, 3601), (4, 3, 7, 7), 2, 3, 1, torch.bfloat16, 2e-2),
        ((1, 16, 5, 3000), (8, 16, 3, 5), 1, 2, 2, torch.float32, 1e-4),
    ],
)
def test_wide_rows_split_into_columns_isa_mode(xs, ws, stride, padding, dilation, dtype, tol):
    test_weight_grad_stacked_taps_isa_mode(xs, ws, stride, padding, dilation, dtype, tol)


def test_wide_7x7_weight_grad_isa_mode():
    # 512 input channels by 49 taps: next to the gradient staging tile of a 512-wide b-block
    # (100 KB) bands of 112-wide rows hold only 4 rows, so the program takes 256-wide blocks.
    torch.manual_seed(0)
    x = torch.randn(1, 512, 112, 112)
    w = torch.randn(8, 512, 7, 7) * 0.05
    _check(x, w, 2, 3, False, 1e-4, isa=True)


class BasicBlock(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + x)


class StemNet(nn.Module):
    """torchvision's ResNet stem (7x7/2 conv, batch norm, ReLU, 3x3/2 max pool) and one basic
    block, at ImageNet resolution."""

    def __init__(self, width: int = 16, classes: int = 5):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.block = BasicBlock(width)
        self.fc = nn.Linear(width, classes)

    def forward(self, x):
        y = self.pool(F.relu(self.bn1(self.conv1(x))))
        return self.fc(F.adaptive_avg_pool2d(self.block(y), 1).flatten(1))


def test_resnet_stem_224_trains_one_step_as_on_cpu():
    torch.manual_seed(0)
    cpu = StemNet()
    dev = copy.deepcopy(cpu).to("neuron")
    x = torch.randn(2, 3, 224, 224)
    target = torch.tensor([1, 3])
    neuronsim.clear_op_tracking()
    for model, xs, ts in ((cpu, x, target), (dev, x.to("neuron"), target.to("neuron"))):
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        opt.zero_grad()
        loss = F.cross_entropy(model(xs), ts)
        loss.backward()
        opt.step()
        model.loss = loss.item()
    assert dev.loss == pytest.approx(cpu.loss, rel=1e-5)
    tol = {"rtol": 1e-4, "atol": 1e-5}
    for (name, a), (_, b) in zip(cpu.named_parameters(), dev.named_parameters(), strict=True):
        assert_close(b.detach().cpu(), a.detach(), msg=lambda m, n=name: f"{n}: {m}", **tol)
        assert_close(b.grad.cpu(), a.grad, msg=lambda m, n=name: f"grad {n}: {m}", **tol)
    for (name, a), (_, b) in zip(cpu.named_buffers(), dev.named_buffers(), strict=True):
        assert_close(b.cpu(), a, msg=lambda m, n=name: f"buffer {n}: {m}", **tol)
    assert neuronsim.get_fallback_ops() == set()
    assert CONV_OPS <= neuronsim.get_executed_ops()
