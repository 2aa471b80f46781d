"""torch.profiler with the neuron device: device time per op in key_averages, device rows in the
exported Chrome trace, and the legacy (use_kineto=False) profiler."""

import json
from pathlib import Path

import pytest
import torch
from conftest import run_python
from torch.profiler import ProfilerActivity, profile

_PRESET = json.loads(
    (Path(__file__).resolve().parents[2] / "device_model" / "presets" / "trn1.json").read_text()
)


def _device_time(evt):
    return getattr(evt, "self_device_time_total", 0) or getattr(evt, "device_time_total", 0)


def _expected_mm_us(n: int) -> float:
    """The roofline time of an n x n x n fp32 matmul on one trn1 NeuronCore (the default
    device), in microseconds: the slower of TensorE (rows x columns MACs per cycle, fp32 at
    fp32_cost_factor times the cost) and HBM (A and B read, C written once)."""
    t = {k: v["value"] for k, v in _PRESET["tensor"].items() if isinstance(v, dict)}
    macs_per_s = t["rows"] * t["columns"] * t["frequency_ghz"] * 1e9 / t["fp32_cost_factor"]
    tensor_s = n**3 / macs_per_s
    hbm_s = 3 * n * n * 4 / (_PRESET["hbm"]["bandwidth_gbps"]["value"] * 1e9)
    return max(tensor_s, hbm_s) * 1e6


def _assert_within_2x(measured_us: float, n: int) -> None:
    # Never faster than the roofline, at most twice it (DMA latency, operand transposes).
    expected = _expected_mm_us(n)
    assert expected <= measured_us <= 2 * expected, (measured_us, expected)


def test_matmul_device_time_in_key_averages(tmp_path):
    a = torch.randn(1024, 1024, device="neuron")
    b = torch.randn(1024, 1024, device="neuron")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        c = a @ b
        torch.neuron.synchronize()
    assert c.shape == (1024, 1024)
    rows = {e.key: e for e in prof.key_averages()}
    assert "aten::mm" in rows
    mm = rows["aten::mm"]
    # 1024^3 at fp32 on one NeuronCore: ~94 simulated microseconds of TensorE work.
    _assert_within_2x(mm.device_time_total, 1024)
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
    _assert_within_2x(times[1], 1024)


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


_LEGACY = """
import torch, neuronsim
from torch.profiler import ProfilerActivity, profile
if {after_kineto}:
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
        torch.ones(4, device="neuron").add(1)
        torch.neuron.synchronize()
a = torch.randn(1024, 1024, device="neuron")
with torch.autograd.profiler.profile(use_device="neuron", use_kineto=False) as prof:
    a @ a
print({{e.key: e for e in prof.key_averages()}}["aten::mm"].device_time_total)
"""


def _legacy_mm_us(after_kineto: bool) -> float:
    p = run_python(_LEGACY.format(after_kineto=after_kineto))
    assert p.returncode == 0, p.stderr[-2000:]
    return float(p.stdout.strip().splitlines()[-1])


def test_legacy_profiler_reports_device_time():
    # A fresh process: the legacy profiler's device events on the simulated clock.
    _assert_within_2x(_legacy_mm_us(False), 1024)


@pytest.mark.xfail(
    strict=True,
    reason="BUG: once a torch.profiler (Kineto) session has run in the process, the legacy "
    "profiler also collects the neuron Kineto child profiler's kernel activities and adds them "
    "to the op's own device-event time, so aten::mm reports ~2x its device time (231 us vs 115)",
)
def test_legacy_profiler_after_a_kineto_session():
    _assert_within_2x(_legacy_mm_us(True), 1024)
