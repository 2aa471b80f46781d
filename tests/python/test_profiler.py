"""torch.profiler with the neuron device: device time per op in key_averages, device rows in the
exported Chrome trace, and the legacy (use_kineto=False) profiler."""

import json

import torch
from torch.profiler import ProfilerActivity, profile


def _device_time(evt):
    return getattr(evt, "self_device_time_total", 0) or getattr(evt, "device_time_total", 0)


def test_matmul_device_time_in_key_averages(tmp_path):
    a = torch.randn(512, 512, device="neuron")
    b = torch.randn(512, 512, device="neuron")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        c = a @ b
        torch.neuron.synchronize()
    assert c.shape == (512, 512)
    rows = {e.key: e for e in prof.key_averages()}
    assert "aten::mm" in rows
    mm = rows["aten::mm"]
    # 512^3 bf16-class work at fp32 on one NeuronCore: tens of simulated microseconds.
    assert mm.device_time_total > 1.0, mm
    table = prof.key_averages().table(sort_by="device_time_total", row_limit=20)
    assert "aten::mm" in table and "NEURON" in table.upper()


def test_bigger_matmul_takes_longer_on_the_device():
    times = []
    for n in (256, 1024):
        a = torch.randn(n, n, device="neuron")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            a @ a
            torch.neuron.synchronize()
        times.append({e.key: e for e in prof.key_averages()}["aten::mm"].device_time_total)
    assert times[1] > 8 * times[0], times


def test_exported_chrome_trace_has_engine_rows(tmp_path):
    a = torch.randn(256, 256, device="neuron")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        (a @ a).relu()
        torch.neuron.synchronize()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    kernel_names = {e["name"] for e in events if e.get("cat") == "kernel"}
    assert any(n.startswith("kernel aten::mm") for n in kernel_names), kernel_names
    assert any(n.startswith("TensorE ") for n in kernel_names), kernel_names
    assert any(n.startswith("DMA q") for n in kernel_names), kernel_names


def test_legacy_profiler_reports_device_time():
    a = torch.randn(512, 512, device="neuron")
    with torch.autograd.profiler.profile(use_device="neuron", use_kineto=False) as prof:
        a @ a
    rows = {e.key: e for e in prof.key_averages()}
    assert rows["aten::mm"].device_time_total > 1.0
