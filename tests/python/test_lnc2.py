"""trn2 logical NeuronCores (LNC=2): one op's kernel runs on both physical cores of the pair.

HARDWARE.md 1.10 (Neuron docs ``logical-neuroncore-config.rst``, ``nki/get-started/about/lnc.rst``):
a trn2 logical core pairs two physical cores sharing one HBM stack; NKI's ``kernel[2]`` runs a
program instance on each, and the profiler's rows carry ``pcore_idx`` 0/1. Here matmul splits
its 128-row blocks and elementwise ops their rows across the pair (docs/design.md, "Logical
cores"); in ISA mode both halves are computed by the device, so the values are the one-core
program's exactly, and the trace shows both pcores' engines busy inside the logical core's
process.
"""

import json

import pytest
from conftest import run_python

_RUN = """
    import json, os, tempfile, torch, neuronsim
    import neuronsim.tracing
    from neuronsim import _C
    torch.manual_seed(0)
    a, b = torch.randn(512, 384), torch.randn(384, 640)
    ab, bb = a.bfloat16(), b.bfloat16()
    x, y = torch.randn(512, 1024), torch.randn(512, 1024)
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    with neuronsim.tracing.trace(path):
        mm = torch.mm(a.to("neuron"), b.to("neuron")).cpu()
        mm16 = torch.mm(ab.to("neuron"), bb.to("neuron")).cpu()
        add = (x.to("neuron") + y.to("neuron")).cpu()
    torch.save({"mm": mm, "mm16": mm16, "add": add}, os.path.join(os.environ["OUT"]))
    names, rows = {}, {}
    events = json.load(open(path))["traceEvents"]
    for e in events:
        if e.get("ph") == "M" and e["name"] == "process_name":
            names[e["pid"]] = e["args"]["name"]
    for e in events:
        if e.get("ph") == "M" and e["name"] == "thread_name":
            rows[(e["pid"], e["tid"])] = (names.get(e["pid"]), e["args"]["name"])
    busy = {}
    for e in events:
        if e.get("ph") == "X" and (e["pid"], e["tid"]) in rows:
            key = " / ".join(rows[(e["pid"], e["tid"])])
            busy.setdefault(key, {})
            busy[key][e["name"]] = busy[key].get(e["name"], 0) + e["dur"]
    kernels = [e["args"] for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    print(json.dumps({"fallbacks": sorted(neuronsim.get_fallback_ops()),
                      "host_ops": dict(_C._isa_host_ops()),
                      "busy": busy, "grids": [k.get("grid", 1) for k in kernels],
                      "count": torch.neuron.device_count()}))
"""


def _run(tmp_path, name, env):
    out = tmp_path / f"{name}.pt"
    r = run_python(_RUN, env={"NEURON_SIM_MODE": "isa", "OUT": str(out), **env})
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1]), out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lnc2")
    two = _run(tmp, "lnc2", {"NEURON_SIM_PRESET": "trn2"})
    one = _run(
        tmp, "lnc1", {"NEURON_SIM_PRESET": "trn2", "NEURON_SIM_SET": "chip.logical_core_size=1"}
    )
    return two, one


def test_mm_and_add_on_trn2_use_both_physical_cores_with_one_core_values(runs):
    import torch

    (two, two_path), (one, one_path) = runs
    assert two["count"] == 4 and one["count"] == 8
    for info in (two, one):
        assert not info["fallbacks"], info["fallbacks"]  # ISA mode: the device computed them
        assert not info["host_ops"], info["host_ops"]
    # mm (fp32, bf16) and add each ran as one launch over both cores of the logical core.
    assert two["grids"].count(2) >= 3, two["grids"]
    assert set(one["grids"]) == {1}
    busy = two["busy"]
    for row in ("nc0 / TensorE", "nc0 / pcore1 TensorE", "nc0 / VectorE", "nc0 / pcore1 VectorE"):
        assert sum(busy.get(row, {}).values()) > 0, (row, sorted(busy))
    assert sum(busy["nc0 / pcore1 TensorE"].values()) == pytest.approx(
        sum(busy["nc0 / TensorE"].values()), rel=0.1
    )
    assert not any("pcore1" in k for k in one["busy"]), sorted(one["busy"])

    torch.manual_seed(0)
    a, b = torch.randn(512, 384), torch.randn(384, 640)
    x, y = torch.randn(512, 1024), torch.randn(512, 1024)
    got, ref = torch.load(two_path), torch.load(one_path)
    for k in ("mm", "mm16", "add"):
        assert torch.equal(got[k], ref[k]), k  # identical to the one-core program's values
    torch.testing.assert_close(got["mm"], a @ b, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(
        got["mm16"].float(), (a.bfloat16() @ b.bfloat16()).float(), rtol=1e-2, atol=1e-2
    )
    assert torch.equal(got["add"], x + y)
