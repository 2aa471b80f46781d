"""A compiled optimizer step: `torch.compile(opt.step)` with AdamW (foreach, the default, and the
single-tensor loop) updates parameters and state as eager mode does, in fast and ISA mode, in one
launch per step whose per-parameter updates share one multi-tensor program. In ISA mode the
fused programs compute the parameters, including the bias corrections from the CPU step counts
the host run has already advanced."""

from __future__ import annotations

import neuronsim
import pytest
import torch
import torch._dynamo
import torch.nn as nn
from torch.testing import assert_close


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _model(device):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64), nn.LayerNorm(64))
    m = m.to(device)
    for p in m.parameters():
        p.grad = torch.randn(p.shape).to(device)  # drawn on the CPU: the same in ISA mode
    return m


def _run(device, foreach, compiled, steps=3):
    m = _model(device)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1, foreach=foreach)
    step = torch.compile(opt.step) if compiled else opt.step
    for _ in range(steps):
        step()
    state = [opt.state[p] for p in m.parameters()]
    return (
        [p.detach().cpu() for p in m.parameters()],
        [s["exp_avg"].cpu() for s in state],
        [s["exp_avg_sq"].cpu() for s in state],
    )


@pytest.mark.parametrize("isa", [False, True], ids=["fast", "isa"])
@pytest.mark.parametrize("foreach", [None, False], ids=["foreach", "single"])
def test_compiled_adamw_equals_eager(isa, foreach):
    before = neuronsim._C._isa_mode()
    neuronsim._C._set_isa_mode(isa)
    try:
        want = _run("cpu", foreach, compiled=False)
        got = _run("neuron", foreach, compiled=True)
    finally:
        neuronsim._C._set_isa_mode(before)
    for w, g in zip(want, got, strict=True):
        assert_close(g, w, rtol=1e-4, atol=1e-5)


def test_compiled_adamw_is_one_launch_with_one_update_program():
    m = _model("neuron")
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    step = torch.compile(opt.step)
    step()
    step()
    launches = neuronsim._C._launches()
    step()
    assert neuronsim._C._launches() - launches == 1
    g = neuronsim.compile_stats()["per_graph"][-1]
    assert g["eager_nodes"] == {} and g["host_nodes"] == {}
    # Six parameters' updates in one multi-tensor program: a few hundred instructions, not one
    # pipeline of tiny tiles per parameter.
    assert g["instructions"] < 2000, g["instructions"]
