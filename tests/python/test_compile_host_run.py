"""Fast mode's host run of a compiled graph (compiler/runner.py, graph/host_run.h): its large
allocations come from device memory, so its results become device tensors without a copy; they
must stay valid after the run, their memory must be freed with them, and the graph's ops are
still counted (the op observer is off during the run) and still seen by the profiler."""

from __future__ import annotations

import copy

import neuronsim
import pytest
import torch
import torch._dynamo
from torch.testing import assert_close


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _f(x, w):
    y = (x @ w).relu() + 1  # 256 x 256 fp32: 256 KiB, above the host run's 64 KiB threshold
    return y, y.t(), y[1:]  # three outputs on one storage


def test_outputs_outlive_the_run_and_their_memory_is_freed():
    torch.manual_seed(0)
    w = torch.randn(256, 256)
    xs = [torch.randn(256, 256) for _ in range(4)]
    wd = w.to("neuron")
    f = torch.compile(_f)
    f(xs[0].to("neuron"), wd)  # compiles
    torch.neuron.synchronize()
    base = torch.neuron.memory_allocated()
    outs = [f(x.to("neuron"), wd) for x in xs]
    for x, got in zip(xs, outs, strict=True):
        y, yt, tail = got
        want = _f(x, w)[0]
        assert y.device.type == "neuron"
        assert yt.data_ptr() == y.data_ptr() and tail.data_ptr() == y.data_ptr() + 256 * 4
        assert_close(y.cpu(), want)
        assert_close(yt.cpu(), want.t())
        assert_close(tail.cpu(), want[1:])
    del outs, y, yt, tail, got
    torch.neuron.synchronize()
    # The four inputs' copies are gone too: only the results' memory could remain.
    assert torch.neuron.memory_allocated() <= base


def test_host_run_ops_are_counted_and_profiled():
    x, w = torch.randn(256, 256).to("neuron"), torch.randn(256, 256).to("neuron")
    f = torch.compile(_f)
    f(x, w)
    before = neuronsim.op_report().get("aten::mm", {}).get("native", 0)
    f(x, w)
    assert neuronsim.op_report()["aten::mm"]["native"] == before + 1
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        f(x, w)
    assert any(e.name == "aten::mm" for e in prof.events())


@pytest.fixture
def host_graphs(monkeypatch):
    """The host copies of the graphs compiled while the test runs, after their rewrites."""
    from neuronsim.torch_compile import runner

    graphs = []

    def record(g, constants):
        n = rewrite(g, constants)
        graphs.append(g)
        return n

    rewrite = runner.rewrite_host_graph
    monkeypatch.setattr(runner, "rewrite_host_graph", record)
    return graphs


def _targets(graphs) -> set:
    return {n.target for g in graphs for n in g.nodes if n.op == "call_function"}


def test_select_backwards_stack_the_parts_on_the_host(host_graphs):
    torch.manual_seed(0)
    x = torch.randn(4, 32, 3 * 64, requires_grad=True)

    def f(x):
        q, k, v = x.view(4, 32, 3, 64).permute(2, 0, 1, 3)  # three selects, as in Block
        return (q.sigmoid() * k + v.square()).sum()

    f(x).backward()
    want = x.grad.clone()
    xd = x.detach().to("neuron").requires_grad_()
    torch.compile(f)(xd).backward()
    assert_close(xd.grad.cpu(), want)
    targets = _targets(host_graphs)
    assert torch.ops.aten.stack.default in targets
    assert torch.ops.aten.where.self not in targets


def test_adamw_updates_run_in_place_on_the_host(host_graphs):
    """One in-place lerp for the first moment, and no out= overload (each allocates its results
    and copies them)."""
    torch.manual_seed(0)
    params = [torch.randn(64, 64), torch.randn(64)]
    grads = [torch.randn_like(p) for p in params]

    def run(device, compiled):
        ps = [p.clone().to(device).requires_grad_() for p in params]
        for p, g in zip(ps, grads, strict=True):
            p.grad = g.to(device)
        opt = torch.optim.AdamW(ps, lr=1e-2)
        step = torch.compile(opt.step) if compiled else opt.step
        for _ in range(3):
            step()
        return [p.detach().cpu() for p in ps] + [opt.state[p]["exp_avg"].cpu() for p in ps]

    for g, w in zip(run("neuron", True), run("cpu", False), strict=True):
        assert_close(g, w, rtol=1e-5, atol=1e-6)
    targets = _targets(host_graphs)
    assert torch.ops.aten._foreach_lerp_.Scalar in targets
    assert torch.ops.aten.full_like.default not in targets
    assert torch.ops.aten._foreach_addcmul_.Scalar in targets  # the second moment
    assert torch.ops.aten._foreach_addcdiv_.Scalar in targets  # the parameters
    assert not [t for t in targets if getattr(t, "_overloadname", "").endswith("out")]


@pytest.mark.parametrize("read_between", [False, True])
def test_in_place_update_waits_for_readers_of_the_old_value(read_between):
    """mul(a) then addcmul(that, b, b, out=a) run in place on a, unless something between them
    reads a's old value (it would see the product)."""
    import operator

    from neuronsim.torch_compile.host_rewrites import foreach_in_place

    aten = torch.ops.aten
    torch.manual_seed(0)
    vals = [torch.randn(8), torch.randn(3, 4)]
    g = torch.fx.Graph()
    a = [g.placeholder(f"a{i}") for i in range(2)]
    b = [g.placeholder(f"b{i}") for i in range(2)]
    for x, v in zip(a + b, vals + vals, strict=True):
        x.meta["val"] = v
    p = g.call_function(aten._foreach_mul.Scalar, (a, 0.5))
    p.meta["val"] = [v * 0.5 for v in vals]
    items = [g.call_function(operator.getitem, (p, i)) for i in range(2)]
    for i, x in enumerate(items):
        x.meta["val"] = p.meta["val"][i]
    old = g.call_function(aten.sum.default, (a[0],)) if read_between else None
    g.call_function(aten._foreach_addcmul.Scalar_out, (items, b, b), {"out": a})
    g.output((old, a[0], a[1]))

    def run(graph):
        args = [v.clone() for v in vals + vals]
        return torch.fx.GraphModule(torch.nn.Module(), graph)(*args)

    want = run(g)
    assert foreach_in_place(g) == (0 if read_between else 2)
    got = run(g)
    for w, x in zip(want, got, strict=True):
        assert (w is None and x is None) or torch.equal(w, x)


def test_layer_norm_backward_is_the_cpu_kernel_on_the_host(host_graphs):
    """dx and dw of a layer norm come from native_layer_norm_backward; dy * x_hat, which only
    the fused programs then read, is memory of its layout (no host pass computes it)."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.LayerNorm(128), torch.nn.Linear(128, 8)
    )
    x = torch.randn(4, 32, 64, requires_grad=True)
    m(x).square().mean().backward()
    want = [x.grad] + [p.grad for p in m.parameters()]
    md = copy.deepcopy(m).to("neuron")  # .to() moves a module's parameters and grads in place
    md.zero_grad(set_to_none=True)
    xd = x.detach().to("neuron").requires_grad_()
    torch.compile(md)(xd).square().mean().backward()
    for w, g in zip(want, [xd.grad] + [p.grad for p in md.parameters()], strict=True):
        assert_close(g.cpu(), w, rtol=1e-4, atol=1e-5)
    targets = _targets(host_graphs)
    assert torch.ops.aten.native_layer_norm_backward.default in targets
    assert torch.ops.aten.empty_strided.default in targets


def test_common_subexpressions_run_once_but_outputs_stay_distinct():
    from neuronsim.torch_compile.host_rewrites import common_subexpressions

    aten = torch.ops.aten

    def graph(mutate):
        g = torch.fx.Graph()
        x = g.placeholder("x")
        a = g.call_function(aten.clone.default, (x,))
        b = g.call_function(aten.clone.default, (x,))  # a's twin, read by the programs only
        c = g.call_function(aten.mul.Tensor, (a, 2.0))
        d = g.call_function(aten.mul.Tensor, (b, 2.0))  # an output, as is c
        if mutate:
            g.call_function(aten.add_.Tensor, (x, 1.0))
        g.output(((c, d), (a, b)))
        return g

    g = graph(False)
    assert common_subexpressions(g) == 1  # b merges into a; c and d are outputs
    x = torch.randn(4)
    (c, d), (a, b) = torch.fx.GraphModule(torch.nn.Module(), g)(x)
    assert a is b and c is not d and torch.equal(c, d) and torch.equal(c, x * 2)
    assert common_subexpressions(graph(True)) == 0


_FULL_HBM = """
    import torch, neuronsim
    MiB = 1 << 20
    f = torch.compile(lambda x: (x.exp() * 2).sum(0))
    x = torch.rand(8 * MiB // 4 // 64, 64)
    xd = x.to("neuron")
    f(xd)  # compiles while there is room
    torch.neuron.empty_cache()  # the first run's intermediates are cached blocks
    free = torch.neuron.mem_get_info()[0]
    filler = torch.empty(free - 12 * MiB, dtype=torch.uint8, device="neuron")  # 12 MiB left
    got = f(xd).cpu()  # exp and its product: 16 MiB of intermediates
    torch.testing.assert_close(got, (x.exp() * 2).sum(0))
    assert torch.neuron.memory_stats()["num_ooms"] >= 1  # the host run hit the limit
    print("ok")
"""


def test_host_run_falls_back_to_host_memory_when_the_device_is_full():
    from conftest import run_python

    r = run_python(_FULL_HBM, {"NEURON_SIM_SET": "hbm.capacity_gib=1"})
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]
