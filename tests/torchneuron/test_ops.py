"""A small suite written the way TorchNeuron's tests are written (op tracking through
``torch_neuronx``, negative tests with ``assert_raises``), run against the installed package."""

import pytest
import torch
import torch.nn.functional as F
import torch_neuronx
from neuron_test_utils import (
    assert_op_does_not_run,
    assert_op_falls_back_on_cpu,
    assert_op_runs_on_neuron,
    assert_raises,
    track_neuron_ops,
)
from torch_neuronx.utils import use_mlir_aten_ops

DEVICE = "neuron"


class TestOpsRunOnNeuron:
    @pytest.mark.parametrize(
        "op_name, fn",
        [
            ("aten::add.Tensor", lambda a, b: a + b),
            ("aten::mul.Tensor", lambda a, b: a * b),
            ("aten::mm", lambda a, b: a @ b),
            ("aten::_softmax", lambda a, b: F.softmax(a, -1)),
            ("aten::native_layer_norm", lambda a, b: F.layer_norm(a, (8,))),
            ("aten::gelu", lambda a, b: F.gelu(a)),
            ("aten::sum.dim_IntList", lambda a, b: a.sum(1)),
        ],
    )
    def test_op_matches_cpu_and_runs_on_neuron(self, op_name, fn):
        a_cpu, b_cpu = torch.randn(8, 8), torch.randn(8, 8)
        with track_neuron_ops():
            out = fn(a_cpu.to(DEVICE), b_cpu.to(DEVICE))
            torch.testing.assert_close(out.cpu(), fn(a_cpu, b_cpu))
            assert_op_runs_on_neuron(op_name)

    def test_training_step_runs_on_neuron(self):
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
        model = model.to(DEVICE)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        with track_neuron_ops():
            loss = F.cross_entropy(
                model(torch.randn(4, 8, device=DEVICE)), torch.tensor([0, 1, 2, 3], device=DEVICE)
            )
            loss.backward()
            opt.step()
            assert_op_runs_on_neuron("aten::addmm")
            assert_op_runs_on_neuron("aten::threshold_backward")
            assert torch_neuronx.get_fallback_ops() == []

    def test_unimplemented_op_falls_back_on_cpu(self):
        a = torch.randn(4, 4)
        with track_neuron_ops():
            q, r = torch.linalg.qr(a.to(DEVICE))
            torch.testing.assert_close((q @ r).cpu(), a, rtol=1e-4, atol=1e-4)
            assert_op_falls_back_on_cpu("aten::linalg_qr")


@pytest.mark.skipif(not use_mlir_aten_ops(), reason="MLIR ATen ops not enabled")
class TestMetadataOnlyOps:
    @pytest.mark.parametrize("shape", [(), (5,), (3, 4), (2, 3, 4)])
    def test_atleast_2d(self, shape):
        with track_neuron_ops():
            x = torch.randn(shape, device=DEVICE)
            result = torch.atleast_2d(x)
            torch.testing.assert_close(result.cpu(), torch.atleast_2d(x.cpu()))
            # Metadata-only operations do not run on neuron.
            assert_op_does_not_run("aten::unsqueeze")
            assert_op_does_not_run("aten::atleast_2d")

    @pytest.mark.parametrize(
        "op_name, fn",
        [
            ("aten::view", lambda x: x.view(16)),
            ("aten::transpose.int", lambda x: x.transpose(0, 1)),
            ("aten::permute", lambda x: x.permute(1, 0)),
            ("aten::expand", lambda x: x[:1].expand(4, 4)),
            ("aten::squeeze.dim", lambda x: x[None].squeeze(0)),
        ],
    )
    def test_view_ops_do_not_run(self, op_name, fn):
        x = torch.randn(4, 4, device=DEVICE)
        with track_neuron_ops():
            fn(x)
            assert_op_does_not_run(op_name)

    def test_resize_runs_on_neuron(self):
        t = torch.empty(2, device=DEVICE)
        with track_neuron_ops():
            t.resize_(8)
            assert_op_runs_on_neuron("aten::resize_")


class TestBadInput:
    @assert_raises(RuntimeError, match="is on cpu device, expected neuron")
    def test_mul_with_cpu_tensor(self):
        torch.mul(torch.ones(4, device=DEVICE), torch.ones(4))

    @pytest.mark.parametrize("composite_func", [torch.addcmul, torch.addcdiv])
    @assert_raises(
        RuntimeError,
        match=r"(Non-scalar tensor arg2 is on cpu device, expected neuron|"
        r"Expected all tensors to be on the same device)",
    )
    def test_composite_func_with_tensor_not_on_device(self, composite_func):
        composite_func(
            torch.ones(3, 3, device=DEVICE), torch.ones(3, 3, device=DEVICE), torch.ones(3, 3)
        )

    @assert_raises(IndexError, match="index out of range in self")
    def test_embedding_index_out_of_range(self):
        F.embedding(torch.tensor([0, 7], device=DEVICE), torch.randn(4, 3, device=DEVICE))

    @assert_raises(RuntimeError, match=r"index 5 is out of bounds for dimension 1 with size 4")
    def test_gather_index_out_of_bounds(self):
        torch.gather(torch.randn(2, 4, device=DEVICE), 1, torch.tensor([[5], [0]], device=DEVICE))

    @assert_raises(RuntimeError, match="shapes cannot be multiplied")
    def test_mm_shape_mismatch(self):
        torch.randn(3, 4, device=DEVICE) @ torch.randn(5, 6, device=DEVICE)

    @assert_raises(RuntimeError, match=r"NRT allocation failed for size \d+ \(OOM\)")
    def test_out_of_memory(self):
        torch.empty(64 << 30, dtype=torch.uint8, device=DEVICE)

    @assert_raises(ValueError, match="Invalid device id")
    def test_set_invalid_device(self):
        torch_neuronx.set_device(torch_neuronx.device_count())


class TestDeviceApi:
    def test_device_name_and_properties(self):
        assert torch.neuron.get_device_name(0) == "neuron:0"
        props = torch_neuronx.get_device_properties("neuron:0")
        assert props.name == torch_neuronx._C._get_platform_target()
        assert props.total_memory > 0

    def test_memory_stats_schema(self):
        x = torch.randn(1024, device=DEVICE)
        torch_neuronx.synchronize()
        stats = torch_neuronx.memory_stats(device=0)
        for key in ("allocated_bytes", "reserved_bytes", "active_bytes"):
            assert set(stats[key]) == {"current", "peak", "allocated", "freed"}
        assert stats["allocated_bytes"]["current"] >= 4096
        assert stats["allocation_requests"] >= 1
        assert "Neuron Memory Summary" in torch_neuronx.memory_summary()
        del x

    def test_events_time_the_stream(self):
        start, end = (
            torch_neuronx.Event(enable_timing=True),
            torch_neuronx.Event(enable_timing=True),
        )
        start.record()
        torch.randn(256, 256, device=DEVICE) @ torch.randn(256, 256, device=DEVICE)
        end.record()
        end.synchronize()
        assert start.elapsed_time(end) > 0


class TestRandom:
    def test_rng_state_format(self):
        state = torch.neuron.get_rng_state(0)
        assert len(state) == 16 and state.dtype == torch.uint8

    def test_torch_manual_seed_seeds_neuron(self):
        torch.manual_seed(2)
        assert torch.neuron.initial_seed() == 2

    def test_neuron_draws_come_from_the_cpu_stream(self):
        torch.manual_seed(42)
        cpu_only = [torch.randn(5) for _ in range(3)]
        torch.manual_seed(42)
        mixed = [torch.randn(5), torch.randn(5, device=DEVICE).cpu(), torch.randn(5)]
        assert all(torch.equal(a, b) for a, b in zip(cpu_only, mixed, strict=True))
