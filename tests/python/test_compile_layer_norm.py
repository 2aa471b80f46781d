"""Layer norm in compiled graphs: traced statistics (mean, rstd) have the dtype the device, like
the CPU, gives them (a bf16 layer norm's are bf16, not CUDA's float32), so a bf16 graph stores
and reads the statistics eager mode does, with no special case; compiled training steps match
eager in fp32 and bf16, fast and ISA mode."""

from __future__ import annotations

import copy

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


def _train_step(dtype, isa: bool):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 8))
    model = model.to(dtype)
    eager = copy.deepcopy(model).to("neuron")
    comp = copy.deepcopy(model).to("neuron")
    x = torch.randn(4, 16, 64, dtype=dtype)
    before = len(neuronsim.compile_stats()["per_graph"])
    before_isa = neuronsim._C._isa_mode()
    neuronsim._C._set_isa_mode(isa)
    try:
        eager(x.to("neuron")).float().square().sum().backward()
        torch.compile(comp, backend="neuron")(x.to("neuron")).float().square().sum().backward()
    finally:
        neuronsim._C._set_isa_mode(before_isa)
    return eager, comp, before


@pytest.mark.parametrize("isa", [False, True], ids=["fast", "isa"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_layer_norm_training_step_matches_eager(dtype, isa):
    eager, comp, before = _train_step(dtype, isa)
    graphs = neuronsim.compile_stats()["per_graph"][before:]
    assert [g["kind"] for g in graphs] == ["forward", "backward"], graphs
    for g in graphs:
        assert g["fallback"] is None and g["eager_nodes"] == {} and g["host_nodes"] == {}, g
        assert g["launches"] == 1, g
    for (name, a), b in zip(eager.named_parameters(), comp.parameters(), strict=True):
        assert b.grad.dtype == a.grad.dtype == dtype
        got, want = b.grad.cpu().float(), a.grad.cpu().float()
        if dtype == torch.float32:
            tol = {"rtol": 1e-4, "atol": 1e-4} if isa else {"rtol": 1e-5, "atol": 1e-5}
            assert_close(got, want, **tol, msg=lambda m, n=name: f"{n}.grad: {m}")
        else:
            # Fused regions round to bf16 only where a value leaves them, eager after every op:
            # elements differ by bf16 roundings, the gradient as a whole by far less.
            err = ((got - want).norm() / want.norm()).item()
            assert err < 1e-2, f"{name}.grad: relative error {err}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_traced_layer_norm_statistics_have_the_cpu_dtype(dtype):
    """Fake (traced) native_layer_norm on the device gives mean/rstd the dtype the device's
    eager kernel and the CPU give them (the input's), not CUDA's float32."""
    import neuronsim.torch_compile.layer_norm_stats as stats
    from torch._subclasses.fake_tensor import FakeTensorMode

    stats.install()
    x = torch.randn(4, 8, dtype=dtype)
    w, b = torch.ones(8, dtype=dtype), torch.zeros(8, dtype=dtype)
    _, cpu_mean, cpu_rstd = torch.ops.aten.native_layer_norm(x, [8], w, b, 1e-5)
    _, dev_mean, dev_rstd = torch.ops.aten.native_layer_norm(
        x.to("neuron"), [8], w.to("neuron"), b.to("neuron"), 1e-5
    )
    mode = FakeTensorMode()
    fx, fw, fb = (mode.from_tensor(t.to("neuron")) for t in (x, w, b))
    with mode:
        _, mean, rstd = torch.ops.aten.native_layer_norm(fx, [8], fw, fb, 1e-5)
    assert mean.dtype == rstd.dtype == cpu_mean.dtype == dev_mean.dtype == dtype
    assert mean.shape == cpu_mean.shape == dev_mean.shape
    assert rstd.dtype == cpu_rstd.dtype == dev_rstd.dtype


def test_bf16_graph_stores_bf16_statistics():
    """The forward graph of a bf16 layer norm returns its saved mean and rstd in bf16, as the
    device's eager kernel and the CPU give them."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    torch.manual_seed(0)
    seen = []
    ln = nn.LayerNorm(32).bfloat16().to("neuron")
    x = torch.randn(8, 32, dtype=torch.bfloat16, device="neuron", requires_grad=True)

    def fw(gm, inputs):
        for n in gm.graph.nodes:
            if n.target is torch.ops.aten.native_layer_norm.default:
                seen.extend(t.dtype for t in n.meta["val"][1:])
        return make_boxed_func(gm.forward)

    out = torch.compile(ln, backend=aot_autograd(fw_compiler=fw))(x)
    out.float().sum().backward()
    assert seen == [torch.bfloat16, torch.bfloat16], seen
