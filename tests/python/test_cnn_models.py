"""A tiny ResNet (convolutions, batch norm, max and average pooling, a residual add) trains on
the neuron device exactly as on the CPU, with no op taking the CPU fallback.

Losses, parameters, gradients and batch norm's running statistics are compared after every SGD
step, then the model is compared in eval mode (which normalises with the running statistics). In
the default (fast) mode every native op computes with ATen's CPU kernel on zero-copy views, so
results agree to the tolerances of test_autograd_models (the optimizer's foreach path on the
device may order the same arithmetic differently). ``test_tiny_resnet_isa_mode`` runs one step
with the programs computing the values (ISA mode), to fp32 accumulation-order tolerances.
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

F32 = {"rtol": 1e-5, "atol": 1e-6}


class Block(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.skip = (
            nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
            if stride != 1 or c_in != c_out
            else nn.Identity()
        )

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.skip(x))


class TinyResNet(nn.Module):
    def __init__(self, classes: int = 5):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 8, 3, 1, 1, bias=False),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        )
        self.blocks = nn.Sequential(Block(8, 8, 1), Block(8, 16, 2))
        self.pool = nn.AvgPool2d(2)
        self.head = nn.Linear(16 * 2 * 2, classes)

    def forward(self, x):
        return self.head(self.pool(self.blocks(self.stem(x))).flatten(1))


def _compare(cpu: nn.Module, dev: nn.Module, tol: dict) -> None:
    for (name, a), (_, b) in zip(cpu.named_parameters(), dev.named_parameters(), strict=True):
        assert_close(b.detach().cpu(), a.detach(), msg=lambda m, n=name: f"{n}: {m}", **tol)
        assert_close(b.grad.cpu(), a.grad, msg=lambda m, n=name: f"grad {n}: {m}", **tol)
    for (name, a), (_, b) in zip(cpu.named_buffers(), dev.named_buffers(), strict=True):
        assert_close(b.cpu(), a, msg=lambda m, n=name: f"buffer {n}: {m}", **tol)


def _train(steps: int, tol: dict) -> list[tuple[float, float]]:
    torch.manual_seed(0)
    cpu = TinyResNet()
    dev = copy.deepcopy(cpu).to("neuron")
    opt_c = torch.optim.SGD(cpu.parameters(), lr=0.1, momentum=0.9)
    opt_d = torch.optim.SGD(dev.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(4, 3, 16, 16)
    target = torch.tensor([0, 1, 2, 4])
    losses = []
    for _ in range(steps):
        for model, opt, xs, ts in (
            (cpu, opt_c, x, target),
            (dev, opt_d, x.to("neuron"), target.to("neuron")),
        ):
            opt.zero_grad()
            loss = F.cross_entropy(model(xs), ts)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[-1] == pytest.approx(losses[-2], rel=tol["rtol"], abs=tol["atol"])
        _compare(cpu, dev, tol)
    cpu.eval()
    dev.eval()
    with torch.no_grad():
        assert_close(dev(x.to("neuron")).cpu(), cpu(x), **tol)
    return list(zip(losses[0::2], losses[1::2], strict=True))


def test_tiny_resnet_trains_as_on_cpu_without_fallback():
    neuronsim.clear_op_tracking()
    losses = _train(3, F32)
    assert losses[-1][0] < losses[0][0]
    assert neuronsim.get_fallback_ops() == set()
    executed = neuronsim.get_executed_ops()
    for op in (
        "aten::convolution",
        "aten::convolution_backward",
        "aten::native_batch_norm",
        "aten::native_batch_norm_backward",
        "aten::max_pool2d_with_indices",
        "aten::max_pool2d_with_indices_backward",
        "aten::avg_pool2d",
        "aten::avg_pool2d_backward",
    ):
        assert op in executed, op


def test_tiny_resnet_isa_mode():
    _C._set_isa_mode(True)
    try:
        _train(1, {"rtol": 1e-4, "atol": 1e-5})
    finally:
        _C._set_isa_mode(False)
    assert neuronsim.get_fallback_ops() == set()
