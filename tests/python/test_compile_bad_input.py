"""torch.compile on neuron with input the graph compiler cannot take: an op it cannot lower runs
as the eager kernel inside the graph's launch (counted), a size that depends on data is a clear
warning and eager kernels for that graph, and a failure inside the compiler falls back to eager
kernels with a warning, or raises under NEURON_SIM_STRICT=1."""

from __future__ import annotations

import neuronsim
import neuronsim.torch_compile.backend as backend
import pytest
import torch
import torch._dynamo
from torch.testing import assert_close

F32 = {"rtol": 1e-5, "atol": 1e-5}


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    backend._cache.clear()
    yield
    torch._dynamo.reset()


def test_unlowerable_op_runs_its_library_program_inside_the_launch_and_is_counted():
    """cumsum has an op-library program but no lowering in the graph compiler: it joins the
    launch as that program, built at compile time; the ops around it are fused."""

    def fn(x):
        return (torch.cumsum(x * 2, dim=1)).relu() + 1

    x = torch.randn(4, 32)
    out = torch.compile(fn, backend="neuron")(x.to("neuron"))
    assert_close(out.cpu(), fn(x), **F32)
    g = neuronsim.compile_stats()["per_graph"][-1]
    assert g["kernel_nodes"] == {"aten::cumsum": 1} and g["eager_nodes"] == {}, g
    assert g["host_nodes"] == {}, g
    assert g["launches"] == 1 and g["regions"] >= 1, g
    assert any("aten::cumsum" in k and "no lowering" in k for k in g["not_fused"]), g


def test_data_dependent_op_runs_natively_inside_the_launch_and_is_counted():
    """Embedding's data movement depends on its indices: its device kernel (a gather whose
    DMA descriptors come from the ids) runs inside the launch, counted as a native node, not
    an eager one; the ops around it are fused."""

    def fn(ids, w):
        return (torch.nn.functional.embedding(ids, w) * 2).relu() + 1

    ids, w = torch.randint(0, 50, (4, 16)), torch.randn(50, 32)
    out = torch.compile(fn, backend="neuron")(ids.to("neuron"), w.to("neuron"))
    assert_close(out.cpu(), fn(ids, w), **F32)
    g = neuronsim.compile_stats()["per_graph"][-1]
    assert g["native_nodes"] == {"aten::embedding": 1} and g["eager_nodes"] == {}, g
    assert g["launches"] == 1 and g["regions"] >= 1, g
    assert any(k.startswith("aten::embedding: data-dependent") for k in g["not_fused"]), g


def _data_dependent(x):
    return x[x > 0] * 2


def test_data_dependent_size_is_a_clear_warning_and_runs_eagerly():
    x = torch.randn(64)
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        compiled = torch.compile(_data_dependent, backend="neuron", fullgraph=True)
        before = neuronsim.compile_stats()["fallback_graphs"]
        with pytest.warns(UserWarning, match="a size depends on data"):
            out = compiled(x.to("neuron"))
    assert_close(out.cpu(), _data_dependent(x), **F32)
    after = neuronsim.compile_stats()
    assert after["fallback_graphs"] == before + 1
    assert "a size depends on data" in after["fallback_reasons"][-1]


def test_data_dependent_size_raises_under_strict(monkeypatch):
    monkeypatch.setenv("NEURON_SIM_STRICT", "1")
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        compiled = torch.compile(_data_dependent, backend="neuron", fullgraph=True)
        with pytest.raises(RuntimeError, match="a size depends on data"):
            compiled(torch.randn(64).to("neuron"))


class _FailingBuilder:
    """The graph builder with a compile step that fails, as a bug in the fusion pass would."""

    def compile(self, name):
        raise RuntimeError(f"fusion of {name} failed (injected)")


def _fn(x, w):
    return torch.softmax(x @ w, dim=-1) * 3


@pytest.fixture
def failing_fusion(monkeypatch):
    describe = backend.describe

    def failing_describe(gm, concrete):
        d = describe(gm, concrete)
        d.builder = _FailingBuilder()
        return d

    monkeypatch.setattr(backend, "describe", failing_describe)


def test_fusion_failure_falls_back_to_eager_kernels_with_a_warning(failing_fusion):
    x, w = torch.randn(8, 16), torch.randn(16, 8)
    before = neuronsim.compile_stats()["fallback_graphs"]
    with pytest.warns(UserWarning, match=r"runs with eager kernels: .*failed \(injected\)"):
        out = torch.compile(_fn, backend="neuron")(x.to("neuron"), w.to("neuron"))
    assert_close(out.cpu(), _fn(x, w), **F32)
    assert neuronsim.compile_stats()["fallback_graphs"] == before + 1


def test_fusion_failure_raises_under_strict(failing_fusion, monkeypatch):
    monkeypatch.setenv("NEURON_SIM_STRICT", "1")
    with pytest.raises(Exception, match=r"NEURON_SIM_STRICT=1 forbids") as info:
        torch.compile(_fn, backend="neuron")(
            torch.randn(8, 16).to("neuron"), torch.randn(16, 8).to("neuron")
        )
    assert "failed (injected)" in str(info.value)
