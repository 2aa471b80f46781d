"""``torch.compile(backend="neuron")``: AOT autograd graphs run with the device's eager kernels.

Compiled results are compared with eager results on the device and on the CPU. AOT autograd
traces to ATen and may decompose composite ops differently from eager mode, so comparisons use
float32 tolerances (rtol=1e-5, atol=1e-6) rather than bitwise equality. ``compile_stats()`` is
process-global, so tests look at its growth.
"""

from __future__ import annotations

import copy

import neuronsim
import pytest
import torch
import torch._dynamo
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

F32 = {"rtol": 1e-5, "atol": 1e-6}


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _delta(before: dict) -> dict:
    """Growth of compile_stats()'s counts (its lists and dicts explain them)."""
    after = neuronsim.compile_stats()
    return {k: after[k] - before[k] for k in after if isinstance(after[k], int | float)}


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.ln = nn.LayerNorm(32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(self.ln(F.gelu(self.fc1(x))))


class Block(nn.Module):
    def __init__(self, vocab=50, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.emb = nn.Embedding(vocab, d)
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        b, t = ids.shape
        x = self.emb(ids)
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, -1))
        x = x + self.mlp(self.ln2(x))
        return self.head(x)


def test_backend_is_registered():
    from torch._dynamo.backends.registry import lookup_backend

    assert "neuron" in torch._dynamo.list_backends(exclude_tags=())
    assert callable(lookup_backend("neuron"))


def test_device_interface_is_registered():
    from torch._dynamo.device_interface import (
        get_interface_for_device,
        get_registered_device_interfaces,
    )

    iface = get_interface_for_device("neuron")
    assert "neuron" in dict(get_registered_device_interfaces())
    assert iface is get_interface_for_device(torch.device("neuron", 0))
    assert iface.is_available() is True
    assert iface.device_count() == torch.neuron.device_count() >= 1
    assert iface.current_device() == torch.neuron.current_device()
    props = iface.get_device_properties(0)
    assert props.name == torch.neuron.get_device_properties(0).name
    assert iface.Worker.current_device() == torch.neuron.current_device()
    assert iface.Worker.get_device_properties(0).name == props.name
    prev = iface.exchange_device(0)
    assert iface.current_device() == 0
    iface.set_device(prev)
    iface.synchronize()
    assert isinstance(iface.current_stream(), torch.Stream)
    assert iface.current_stream().device.type == "neuron"


def test_forward_equals_eager_and_counts_one_graph():
    torch.manual_seed(0)
    model = MLP().to("neuron").eval()
    x = torch.randn(8, 16).to("neuron")
    before = neuronsim.compile_stats()
    compiled = torch.compile(model, backend="neuron")
    with torch.no_grad():
        y = compiled(x)
        y_eager = model(x)
    d = _delta(before)
    assert d["graphs"] == 1 and d["backward_graphs"] == 0, d
    assert d["nodes"] >= 4, d  # addmm, gelu, layer norm, addmm at least
    assert y.device.type == "neuron"
    assert_close(y.cpu(), y_eager.cpu(), **F32)
    cpu = copy.deepcopy(model).cpu()
    assert_close(y.cpu(), cpu(x.cpu()).detach(), **F32)
    # A second call with the same shapes reuses the graph.
    with torch.no_grad():
        compiled(x)
    assert _delta(before)["graphs"] == 1


def test_compiled_graphs_take_boxed_arguments():
    """The backend's compiled graphs use AOT autograd's boxed calling convention (otherwise
    AOT autograd warns and cannot free inputs early)."""
    import warnings

    torch.manual_seed(0)
    model = MLP().to("neuron")
    x = torch.randn(8, 16).to("neuron")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.compile(model, backend="neuron")(x).sum().backward()
    boxed = [str(w.message) for w in caught if "boxed arguments" in str(w.message)]
    assert boxed == []


def test_compiled_graphs_run_native_kernels():
    torch.manual_seed(0)
    model = MLP().to("neuron")
    compiled = torch.compile(model, backend="neuron")
    x = torch.randn(8, 16).to("neuron")
    compiled(x)  # compile first: tracing runs on fake tensors
    neuronsim.clear_op_tracking()
    compiled(x).sum().backward()
    assert neuronsim.get_fallback_ops() == set()
    executed = neuronsim.get_executed_ops()
    assert {"aten::addmm", "aten::native_layer_norm", "aten::gelu"} <= executed, executed
    # The backward graph is decomposed to core ATen, less the composites the compiler lowers
    # whole (gelu_backward stays one op; its host values are one CPU kernel).
    assert {"aten::mm", "aten::gelu_backward", "aten::sum"} <= executed, executed
    assert "aten::erf" not in executed, executed
    assert neuronsim.simulated_time_ns() > 0


def test_node_count_matches_the_aot_graphs():
    """compile_stats()["nodes"] is the number of ATen call nodes in the forward and backward
    graphs, counted here with an independent aot_autograd backend on the same model (with the
    same decompositions: core ATen less the composites the compiler lowers whole)."""
    import operator

    from neuronsim.torch_compile.backend import decompositions
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    counted = {"fw": 0, "bw": 0}

    def counter(kind):
        def compiler(gm, example_inputs):
            counted[kind] += sum(
                1
                for n in gm.graph.nodes
                if n.op == "call_function" and n.target is not operator.getitem
            )
            return make_boxed_func(gm.forward)

        return compiler

    torch.manual_seed(0)
    model = MLP().to("neuron")
    x = torch.randn(8, 16).to("neuron")
    ref_backend = aot_autograd(
        fw_compiler=counter("fw"),
        bw_compiler=counter("bw"),
        decompositions=decompositions(),
    )
    torch.compile(copy.deepcopy(model), backend=ref_backend)(x).sum().backward()
    torch._dynamo.reset()
    before = neuronsim.compile_stats()
    torch.compile(model, backend="neuron")(x).sum().backward()
    d = _delta(before)
    assert d["graphs"] == 1 and d["backward_graphs"] == 1, d
    assert counted["fw"] > 0 and counted["bw"] > 0
    assert d["nodes"] == counted["fw"] + counted["bw"], (d, counted)


def test_backward_through_compile_matches_eager_and_cpu():
    torch.manual_seed(0)
    cpu = Block()
    eager = copy.deepcopy(cpu).to("neuron")
    comp_model = copy.deepcopy(cpu).to("neuron")
    compiled = torch.compile(comp_model, backend="neuron")
    ids = torch.randint(0, 50, (2, 10))
    tgt = torch.randint(0, 50, (2, 10))

    def loss_of(m, a, b):
        return F.cross_entropy(m(a).reshape(-1, 50), b.reshape(-1))

    before = neuronsim.compile_stats()
    loss_c = loss_of(compiled, ids.to("neuron"), tgt.to("neuron"))
    loss_c.backward()
    d = _delta(before)
    assert d["graphs"] >= 1 and d["backward_graphs"] >= 1, d
    loss_e = loss_of(eager, ids.to("neuron"), tgt.to("neuron"))
    loss_e.backward()
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        loss_cpu = loss_of(cpu, ids, tgt)
    loss_cpu.backward()
    assert_close(loss_c.cpu(), loss_e.cpu(), **F32)
    assert_close(loss_c.cpu(), loss_cpu.detach(), **F32)
    for (name, pc), pe, pk in zip(
        cpu.named_parameters(), eager.parameters(), comp_model.parameters(), strict=True
    ):
        assert pk.grad is not None and pk.grad.device.type == "neuron", name
        assert_close(pk.grad.cpu(), pe.grad.cpu(), **F32, msg=name)
        assert_close(pk.grad.cpu(), pc.grad, **F32, msg=name)


def test_compiled_training_loop_matches_eager():
    torch.manual_seed(0)
    eager = MLP().to("neuron")
    comp_model = copy.deepcopy(eager)
    compiled = torch.compile(comp_model, backend="neuron")
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    opt_c = torch.optim.SGD(comp_model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(16, 16).to("neuron"), torch.randn(16, 4).to("neuron")
    for _ in range(4):
        for m, opt in ((eager, opt_e), (compiled, opt_c)):
            opt.zero_grad()
            (m(x) - y).square().mean().backward()
            opt.step()
    for (name, a), b in zip(eager.named_parameters(), comp_model.parameters(), strict=True):
        assert_close(b.detach().cpu(), a.detach().cpu(), **F32, msg=name)


def test_graph_break_still_runs_correctly():
    def fn(x):
        y = torch.sin(x) * 2
        if y.sum().item() > 0:  # data-dependent branch: graph break
            y = y + 1
        else:
            y = y - 1
        return torch.relu(y) @ x.T

    x = torch.randn(6, 6)
    xd = x.to("neuron")
    explanation = torch._dynamo.explain(fn)(xd)
    assert explanation.graph_break_count >= 1
    torch._dynamo.reset()
    before = neuronsim.compile_stats()
    compiled = torch.compile(fn, backend="neuron")
    out = compiled(xd)
    d = _delta(before)
    assert d["graphs"] >= 2, d  # one graph before the break, one after
    assert_close(out.cpu(), fn(x), **F32)
    # The other branch of the break.
    assert_close(compiled(-xd.abs() - 1).cpu(), fn(-x.abs() - 1), **F32)
    torch._dynamo.reset()
    with pytest.raises((torch._dynamo.exc.Unsupported, torch._dynamo.exc.UserError)):
        torch.compile(fn, backend="neuron", fullgraph=True)(xd)


def test_print_graph_break():
    def fn(x):
        x = x * 3
        print("side effect")  # graph break
        return x.exp().sum(dim=0)

    x = torch.randn(4, 5)
    out = torch.compile(fn, backend="neuron")(x.to("neuron"))
    assert_close(out.cpu(), fn(x), **F32)


def test_dynamic_shapes_recompile_once_and_stay_correct():
    torch.manual_seed(0)
    model = MLP().to("neuron").eval()
    compiled = torch.compile(model, backend="neuron")
    cpu = copy.deepcopy(model).cpu()
    before = neuronsim.compile_stats()
    with torch.no_grad():
        for n in (8, 5, 7, 3):
            x = torch.randn(n, 16)
            y = compiled(x.to("neuron"))
            assert y.shape == (n, 4)
            assert_close(y.cpu(), cpu(x), **F32)
    d = _delta(before)
    # Static graph for 8, one dynamic graph for the later sizes.
    assert d["graphs"] == 2, d


def test_dynamic_true_compiles_one_graph():
    def fn(x, w):
        return F.softmax(x @ w, dim=-1).sum(dim=0)

    compiled = torch.compile(fn, backend="neuron", dynamic=True)
    w = torch.randn(16, 8)
    before = neuronsim.compile_stats()
    for n in (4, 9, 13):
        x = torch.randn(n, 16)
        assert_close(compiled(x.to("neuron"), w.to("neuron")).cpu(), fn(x, w), **F32)
    assert _delta(before)["graphs"] == 1


def test_compile_function_with_inplace_and_views():
    def fn(x):
        y = x.clone()
        y[:, 1:] += 1
        y.mul_(2)
        return y.t().contiguous(), y.view(-1).cumsum(0)

    x = torch.randn(4, 6)
    a, b = torch.compile(fn, backend="neuron")(x.to("neuron"))
    ea, eb = fn(x)
    assert_close(a.cpu(), ea, **F32)
    assert_close(b.cpu(), eb, **F32)


def test_bf16_compiled_forward_matches_eager():
    torch.manual_seed(0)
    model = Block().to(torch.bfloat16).to("neuron").eval()
    ids = torch.randint(0, 50, (2, 8)).to("neuron")
    with torch.no_grad():
        eager = model(ids)
        compiled = torch.compile(model, backend="neuron")(ids)
    assert compiled.dtype == torch.bfloat16
    assert_close(compiled.cpu(), eager.cpu())


@pytest.mark.parametrize("padding_idx", [None, 3])
def test_embedding_backward_runs_natively_inside_the_graph(padding_idx):
    """A compiled LM training step (Block: embedding, attention, MLP, head) has no eager node:
    embedding_dense_backward stays one node (not decomposed to a masked index_put) whose
    device kernel, built from the indices, runs inside the backward graph's launch, counted as
    a data-dependent native node; the embedding's gradient matches CPU (repeated ids
    accumulate, padding_idx rows stay zero)."""
    torch.manual_seed(0)
    cpu = Block()
    if padding_idx is not None:
        cpu.emb.padding_idx = padding_idx
    dev = copy.deepcopy(cpu).to("neuron")
    ids = torch.randint(0, 8, (2, 10))  # few distinct ids: repeats accumulate
    ids[0, :3] = 3

    def loss_of(m, x):
        return F.cross_entropy(m(x).reshape(-1, 50), x.reshape(-1))

    before = neuronsim.compile_stats()
    loss_of(torch.compile(dev), ids.to("neuron")).backward()
    d = _delta(before)
    assert d["graphs"] == 1 and d["backward_graphs"] == 1, d
    assert d["eager_nodes"] == 0 and d["host_nodes"] == 0, neuronsim.compile_stats()["not_fused"]
    assert d["native_nodes"] == 2, d  # embedding (forward) and embedding_dense_backward
    bw = neuronsim.compile_stats()["per_graph"][-1]
    assert bw["kind"] == "backward"
    assert bw["native_nodes"] == {"aten::embedding_dense_backward": 1}, bw
    assert "aten::index_put" not in str(bw["not_fused"]), bw["not_fused"]
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        loss_of(cpu, ids).backward()
    assert_close(dev.emb.weight.grad.cpu(), cpu.emb.weight.grad, rtol=1e-4, atol=1e-5)
    if padding_idx is not None:
        assert dev.emb.weight.grad[padding_idx].abs().max().item() == 0.0
    assert_close(dev.head.weight.grad.cpu(), cpu.head.weight.grad, rtol=1e-4, atol=1e-5)


def test_bias_of_a_wide_linear_is_loaded_once_per_n_tile():
    """A matmul region with several N tiles (1100 columns: 512, 512, 76) and M tiles (300 rows)
    keeps each N tile's bias slice for all its M tiles (one copy per N tile): ISA mode computes
    the epilogue from those copies and matches the CPU, partial last tile included."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 1100), nn.GELU())
    x = torch.randn(300, 64)
    dev = copy.deepcopy(model).to("neuron")
    before = neuronsim._C._isa_mode()
    neuronsim._C._set_isa_mode(True)
    try:
        with torch.no_grad():
            got = torch.compile(dev, backend="neuron")(x.to("neuron")).cpu()
    finally:
        neuronsim._C._set_isa_mode(before)
    with torch.no_grad():
        want = model(x)
    assert_close(got, want, rtol=1e-4, atol=1e-4)
