"""The op library: one rule per op, read by eager mode and the graph compiler.

An elementwise op added as one expression rule (kernels/src/ops/elementwise_expressions.cpp) runs
natively in eager mode, in fast and ISA mode, and fuses under torch.compile; `_op_rules()` lists
it with its facets. torch.hypot is the worked example (it used to take the CPU fallback and run
as a host node inside compiled graphs).
"""

import math

import neuronsim
import pytest
import torch
from neuronsim import _C

INF, NAN = math.inf, math.nan
EDGES_A = [0.0, -0.0, 1.0, -3.0, 3e30, -3e30, 1e-30, INF, -INF, NAN, NAN, 2.5]
EDGES_B = [0.0, 2.0, -4.0, 4.0, 4e30, 1.0, 1e-30, NAN, 1.0, 1.0, INF, -6.5]


def _inputs():
    g = torch.Generator().manual_seed(0)
    a = torch.cat([torch.tensor(EDGES_A), torch.randn(500, generator=g) * 100])
    b = torch.cat([torch.tensor(EDGES_B), torch.randn(500, generator=g) * 100])
    return a, b


def test_rule_listed_with_its_facets():
    rules = {r["name"]: r for r in _C._op_rules()}
    r = rules["aten::hypot"]
    assert r["eager"] and r["fuses"] and r["expression"] and not r["metadata_only"]
    # Every rule that fuses is read by the compiler: no op is lowered anywhere else.
    assert all(r["name"].startswith(("aten::", "prims::", "neuronsim::")) for r in rules.values())


@pytest.mark.parametrize("isa", [False, True], ids=["fast", "isa"])
def test_hypot_is_native_and_matches_cpu(isa):
    a, b = _inputs()
    _C._set_isa_mode(isa)
    try:
        neuronsim.clear_op_tracking()
        out = torch.hypot(a.to("neuron"), b.to("neuron")).cpu()
        ops = neuronsim.get_executed_ops()
        fallback = neuronsim.get_fallback_ops()
    finally:
        _C._set_isa_mode(False)
    assert not any("hypot" in op for op in fallback), fallback
    assert any("hypot" in op for op in ops), ops
    # Fast mode: the CPU kernel's values; ISA mode: the program's, within a few fp32 ulps.
    torch.testing.assert_close(
        out, torch.hypot(a, b), rtol=0 if not isa else 4e-7, atol=0, equal_nan=True
    )


def test_hypot_fuses_under_torch_compile():
    a, b = (t.to("neuron") for t in _inputs())
    torch._dynamo.reset()
    before = neuronsim.compile_stats()

    def f(x, y):
        return torch.hypot(x * 2.0, y).relu()

    got = torch.compile(f)(a, b).cpu()
    after = neuronsim.compile_stats()
    torch.testing.assert_close(got, f(a.cpu(), b.cpu()), equal_nan=True)
    assert after["fused_nodes"] - before["fused_nodes"] == 3  # mul, hypot, relu: one region
    assert not any("hypot" in k for k in after["not_fused"]), after["not_fused"]
