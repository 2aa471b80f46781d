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


def _foreach_graph(read_old_after: bool):
    """a, b <- a * 2, b * 2 (functionalised: results copied into the inputs at the end); the
    results are read by a later op; optionally so is a's old value."""
    import operator

    g = torch.fx.Graph()
    a, b = g.placeholder("a"), g.placeholder("b")
    f = g.call_function(torch.ops.aten._foreach_mul.Scalar, ([a, b], 2.0))
    f.meta["val"] = [torch.empty(3), torch.empty(3)]
    r = [g.call_function(operator.getitem, (f, i)) for i in range(2)]
    s = g.call_function(torch.ops.aten.add.Tensor, (r[0], r[1]))
    late = g.call_function(torch.ops.aten.mul.Tensor, (a, 3.0)) if read_old_after else s
    g.call_function(torch.ops.aten.copy_.default, (a, r[0]))
    g.call_function(torch.ops.aten.copy_.default, (b, r[1]))
    g.output(((s, late), (r[0],)))
    return g


@pytest.mark.parametrize("read_old_after", [False, True])
def test_host_run_writes_foreach_results_into_inputs(read_old_after):
    """The host run's rewrite of functionalised in-place foreach updates: the op writes into
    the inputs with its out= overload and the copies go, unless something after it reads an
    input's old value; either way the graph computes the same values and input updates."""
    from neuronsim.torch_compile.runner import write_results_into_inputs

    x, y = torch.arange(3.0), torch.arange(3.0) + 10
    ref = torch.fx.GraphModule(torch.nn.Module(), _foreach_graph(read_old_after))
    xr, yr = x.clone(), y.clone()
    want = ref(xr, yr)
    g = _foreach_graph(read_old_after)
    assert write_results_into_inputs(g) == (0 if read_old_after else 1)
    copies = [n for n in g.nodes if n.target is torch.ops.aten.copy_.default]
    assert len(copies) == (2 if read_old_after else 0)
    xg, yg = x.clone(), y.clone()
    got = torch.fx.GraphModule(torch.nn.Module(), g)(xg, yg)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close((xg, yg), (xr, yr))
