"""Fast mode's host run of a compiled graph (compiler/runner.py, graph/host_run.h): its large
allocations come from device memory, so its results become device tensors without a copy; they
must stay valid after the run, their memory must be freed with them, and the graph's ops are
still counted (the op observer is off during the run) and still seen by the profiler."""

from __future__ import annotations

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
