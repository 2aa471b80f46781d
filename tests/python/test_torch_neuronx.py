"""neuronsim's torch_neuronx stand-in (docs/torch_neuronx.md): TorchNeuron's environment
variables, the package next to AWS's own, what its functions return, and the internals it does
not model. The name-by-name surface and a TorchNeuron-style suite run through the installed
wheel (tests/torchneuron, tools/test_wheel.sh); `pytest tests/torchneuron` runs them here too."""

import json
import os
import textwrap
import warnings

import neuronsim
import pytest
import torch
import torch_neuronx
from conftest import run_python


def _json(proc) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---- environment variables ----


def test_import_sets_torchneurons_defaults_and_keeps_the_users():
    out = _json(
        run_python(
            """
            import json, os, torch_neuronx
            keys = ["TORCH_NEURONX_MLIR_ATEN_OPS", "NEURON_LAUNCH_BLOCKING",
                    "NEURON_RT_DBG_ZEROCOPY", "TORCH_NEURONX_ENABLE_ASYNC_NRT"]
            print(json.dumps({k: os.environ.get(k) for k in keys}))
            """,
            {"NEURON_LAUNCH_BLOCKING": "1"},
        )
    )
    assert out == {
        "TORCH_NEURONX_MLIR_ATEN_OPS": "1",
        "NEURON_LAUNCH_BLOCKING": "1",
        "NEURON_RT_DBG_ZEROCOPY": "1",
        "TORCH_NEURONX_ENABLE_ASYNC_NRT": "1",
    }


_LNC = """
    import json, torch, torch_neuronx
    from torch_neuronx import utils
    try:
        out = {"count": torch_neuronx.device_count(), "lnc": utils.get_lnc_setting(),
               "vnc": [torch_neuronx._C._get_vnc_id(i) for i in range(2)],
               "memory": torch_neuronx.get_device_properties(0).total_memory,
               "target": utils.get_platform_target(), "workers": utils.get_worker_multiplier()}
    except RuntimeError as e:
        out = {"error": str(e)}
    print(json.dumps(out))
"""


@pytest.mark.parametrize(
    "env, want",
    [
        ({"NEURON_SIM_PRESET": "trn2"}, {"count": 4, "lnc": "2", "memory": 24 << 30}),
        (
            {"NEURON_SIM_PRESET": "trn2", "NEURON_LOGICAL_NC_CONFIG": "1"},
            {"count": 8, "lnc": "1", "memory": 12 << 30, "workers": 2},
        ),
        ({"NEURON_LOGICAL_NC_CONFIG": "1"}, {"count": 2, "lnc": "1", "target": "trn1"}),
        (
            {"NEURON_SIM_PRESET": "trn2", "NEURON_RT_VISIBLE_CORES": "1,3"},
            {"count": 2, "vnc": [1, 3]},
        ),
    ],
)
def test_logical_nc_config_and_visible_cores(env, want):
    out = _json(run_python(_LNC, env))
    assert {k: out.get(k) for k in want} == want, out


@pytest.mark.parametrize(
    "env, error",
    [
        ({"NEURON_LOGICAL_NC_CONFIG": "2"}, "trn1 preset .* has no logical NeuronCores"),
        ({"NEURON_LOGICAL_NC_CONFIG": "4"}, "'4' is not 1 or 2"),
    ],
)
def test_bad_logical_nc_config_is_a_clear_error(env, error):
    import re

    out = _json(run_python(_LNC, env))
    assert re.search(f"NEURON_LOGICAL_NC_CONFIG.*{error}", out.get("error", "")), out


def test_fallback_only_for_unimplemented_ops(monkeypatch):
    c = torch.ones(3, dtype=torch.complex64, device="neuron")
    monkeypatch.setenv("TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS", "1")
    # add has a device kernel, which does not take complex data: TorchNeuron's error.
    with pytest.raises(RuntimeError, match=r"CPU fallback disabled because .*aten::add\.Tensor"):
        c + c
    # An op without a device kernel still falls back.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.linalg.qr(torch.eye(3, device="neuron"))
    assert "aten::linalg_qr" in torch_neuronx.get_fallback_ops()
    monkeypatch.setenv("TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS", "0")
    assert (c + c).cpu().real.tolist() == [2.0, 2.0, 2.0]


def test_metric_tables_write_dynamo_metrics_at_exit(tmp_path):
    out = _json(
        run_python(
            """
            import json, torch, torch_neuronx
            f = torch.compile(lambda x: (x * 2).relu(), backend="neuron")
            f(torch.randn(8, device="neuron"))
            m = torch_neuronx.get_dynamo_metrics()
            print(json.dumps({"n": len(m), "nodes": m[0].graph_node_count,
                              "us": m[0].torch_neuronx_compile_us}))
            """,
            {
                "TORCH_NEURONX_ENABLED_METRIC_TABLES": "graph_stats",
                "TORCH_NEURONX_METRICS_DIR": str(tmp_path),
            },
        )
    )
    assert out["n"] == 1 and out["nodes"] >= 2 and out["us"] > 0
    lines = (tmp_path / "metric_table_graph_stats_rank0.csv").read_text().splitlines()
    assert lines[0].split(",")[:3] == ["graph_id", "graph_name", "model_name"]
    assert len(lines) == 2


def test_reset_dynamo_metrics():
    torch_neuronx.reset_dynamo_metrics()
    assert torch_neuronx.get_dynamo_metrics() == []
    torch.compile(lambda x: x + 1, backend="neuron")(torch.ones(4, device="neuron"))
    assert len(torch.neuron.get_dynamo_metrics()) == 1
    torch.neuron.reset_dynamo_metrics()
    assert torch_neuronx.get_dynamo_metrics() == []


# ---- next to AWS's package ----


def _fake_real_package(tmp_path):
    info = tmp_path / "torch_neuronx-2.14.3.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torch-neuronx\nVersion: 2.14.3.0\n"
    )
    return str(tmp_path)


def test_import_refuses_next_to_the_real_package(tmp_path):
    proc = run_python(
        "import torch_neuronx", {"PYTHONPATH": _fake_real_package(tmp_path), "NEURON_SIM": ""}
    )
    assert proc.returncode != 0
    assert "ImportError: torch_neuronx (neuronsim's stand-in): AWS's torch-neuronx 2.14.3.0 is" in (
        proc.stderr
    )
    assert "pip uninstall -y torch-neuronx" in proc.stderr


def test_neuronsim_warns_next_to_the_real_package(tmp_path):
    proc = run_python(
        """
        import warnings
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import neuronsim
        print([str(x.message) for x in w if "torch-neuronx" in str(x.message)])
        """,
        {"PYTHONPATH": _fake_real_package(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    assert "AWS's torch-neuronx 2.14.3.0 is installed next to neuronsim" in proc.stdout


def test_another_torch_neuronx_first_on_the_path(tmp_path, monkeypatch):
    import importlib.util

    from neuronsim import _coexistence

    assert _coexistence.conflict() is None
    other = tmp_path / "torch_neuronx" / "__init__.py"
    other.parent.mkdir()
    other.write_text("")
    spec = importlib.util.spec_from_file_location("torch_neuronx", other)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec)
    assert f"finds {other}, not neuronsim's stand-in" in _coexistence.conflict()


# ---- what the functions return ----


def test_op_tracking_returns_lists_and_logs_ops():
    torch_neuronx.clear_op_tracking()
    torch.ones(4, device="neuron").add(1)
    executed = torch_neuronx.get_executed_ops()
    assert isinstance(executed, list) and "aten::add.Tensor" in executed
    torch_neuronx.utils.log_executed_op("nki_my_kernel")
    torch_neuronx.utils.log_offloaded_op("aten::my_op")
    assert "nki_my_kernel" in torch_neuronx.get_executed_ops()
    assert torch_neuronx.get_fallback_ops() == ["aten::my_op"]
    assert neuronsim.op_report()["nki_my_kernel"]["native"] == 1


def test_memory_functions():
    torch_neuronx.empty_cache()
    torch_neuronx.reset_peak_memory_stats()
    before = torch_neuronx.memory_stats()
    x = torch.empty(1 << 20, dtype=torch.uint8, device="neuron")
    stats = torch_neuronx.memory_stats(0)
    assert set(stats) == {
        "allocated_bytes",
        "reserved_bytes",
        "active_bytes",
        "num_alloc_retries",
        "num_ooms",
        "num_tensor_frees",
        "allocation_requests",
    }
    assert stats["allocated_bytes"]["current"] == before["allocated_bytes"]["current"] + (1 << 20)
    assert stats["allocation_requests"] == before["allocation_requests"] + 1
    assert torch_neuronx.memory_allocated() == stats["allocated_bytes"]["current"]
    assert torch_neuronx.max_memory_allocated() >= torch_neuronx.memory_allocated()
    assert torch_neuronx.memory_reserved() >= torch_neuronx.memory_allocated()
    del x
    assert torch_neuronx.memory_stats()["num_tensor_frees"] == stats["num_tensor_frees"] + 1
    # torch.neuron's memory_stats carries the same keys next to CUDA's.
    both = torch.neuron.memory_stats()
    assert both["allocated_bytes"] == torch_neuronx.memory_stats()["allocated_bytes"]
    assert both["allocated_bytes.all.current"] == both["allocated_bytes"]["current"]
    summary = torch_neuronx.memory_summary()
    assert summary.startswith("Neuron Memory Summary, Device 0")
    assert torch.neuron.memory is torch_neuronx.memory


def test_device_functions():
    assert torch_neuronx.device_count() == 2
    with pytest.raises(ValueError, match="Invalid device id: 2. Valid range is 0 to 1"):
        torch_neuronx.set_device(2)
    with pytest.raises(ValueError, match="Expected neuron device, got cpu"):
        torch_neuronx._get_device_index("cpu")
    props = torch_neuronx.get_device_properties("neuron:1")
    assert props.name == "trn1" and props.total_memory == 16 << 30
    assert isinstance(props, torch_neuronx._C.NeuronDeviceProperties)
    assert torch_neuronx._C._get_instance_type() == torch_neuronx._C._get_platform_target()
    assert torch_neuronx.is_neuron_runtime_initialized() is True
    assert torch_neuronx._initialized is True and torch_neuronx._is_in_bad_fork is False
    gen = torch_neuronx._C._get_default_generator(0)
    assert gen.device.type == "neuron"


def test_streams_and_the_stream_triples():
    s = torch_neuronx.Stream()
    assert isinstance(s, torch_neuronx.streams.Stream)
    with torch_neuronx.stream(s):
        assert torch_neuronx.current_stream() == s
        sid, dev, dtype = torch_neuronx._C._neuron_getCurrentStream()
        assert (sid, dev) == (s.stream_id, s.device_index)
    assert torch_neuronx.current_stream() == torch_neuronx.default_stream()
    e = torch.neuron.record_event()
    torch.neuron.wait_event(e)
    torch.neuron.wait_stream(s)
    assert torch.neuron.query() in (True, False)


def test_profiler_writes_the_device_and_pytorch_traces(tmp_path):
    from torch.profiler import ProfilerActivity

    with torch_neuronx.NeuronProfiler(
        pytorch_activities=[ProfilerActivity.CPU], neuron_output_dir=str(tmp_path)
    ) as prof:
        torch.ones(64, 64, device="neuron").matmul(torch.ones(64, 64, device="neuron"))
        assert prof.is_active()
    assert not prof.is_active()
    device_trace = json.loads((tmp_path / "neuron_trace.json").read_text())
    assert any(e.get("name", "").startswith("aten::mm") for e in device_trace["traceEvents"])
    assert (tmp_path / "pytorch_trace.json").exists()
    with pytest.raises(RuntimeError, match="Profiler is not active"):
        prof.stop()


def test_utils():
    u = torch_neuronx.utils
    t = torch.ones(2)
    moved = u.move_pytree_to_neuron({"a": [t, (t, 3)]})
    assert moved["a"][0].device.type == "neuron" and moved["a"][1][1] == 3
    back = u.move_pytree_to_cpu(moved)
    assert back["a"][1][0].device.type == "cpu"
    assert u.use_mlir_aten_ops() and not u.is_sync_mode_enabled()
    assert u.get_platform_target() == "trn1" and u.get_lnc_setting() == "1"
    assert u.map_external_dtype_to_torch(__import__("numpy").float16) == torch.float16
    assert u.map_external_dtype_to_torch(torch.int8) == torch.int8
    assert "add" in u.get_neuron_registered_ops()
    assert "add.Tensor" in u.get_neuron_registered_ops(keep_variant=True)
    assert u.convert_for_neuron(torch.ones(2, dtype=torch.int64)).dtype == torch.int32


def test_internals_are_not_modelled():
    import importlib

    with pytest.raises(ImportError, match="drives the Neuron compiler and runtime"):
        importlib.import_module("torch_neuronx.python_ops")
    with pytest.raises(AttributeError, match="NRT"):
        torch_neuronx._C._nrt_copy_cpu_to_neuron_tensor  # noqa: B018


def test_nki_exports_say_what_is_missing_or_work():
    try:
        import neuronsim.nki.torch_ops  # noqa: F401
    except ImportError:
        with pytest.raises(AttributeError, match="neuronsim.nki.torch_ops could not be imported"):
            torch_neuronx.nki_op  # noqa: B018
    else:
        assert callable(torch_neuronx.nki_op) and callable(torch_neuronx.wrap_nki)


def test_surface_suite_runs_in_this_venv():
    """tests/torchneuron as tools/test_wheel.sh runs it, here against the source tree."""
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/torchneuron"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, textwrap.shorten(proc.stdout[-4000:], 4000)
