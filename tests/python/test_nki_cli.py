"""``neuronsim nki bench`` / ``neuronsim nki lines``: a kernel file's benchmark timing-only on
placeholders, as users run nki.benchmark / neuron-profile, per engine and per source line; a
trace of an NKI kernel through ``neuronsim run --trace``; bad input as one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

CONSOLE = Path(sys.executable).parent / "neuronsim"
KERNELS = Path(REPO) / "tests" / "python" / "nki_kernels" / "legacy_kernels.py"
QUICKSTART = Path(REPO) / "examples" / "nki_quickstart.py"


def _run(*args, timeout=300):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON")}
    return subprocess.run(
        [str(CONSOLE), *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO
    )


def test_bench_json_per_engine_and_line():
    r = _run(
        "nki",
        "bench",
        f"{KERNELS}::matmul_tiled_kernel",
        "--shapes",
        "512x256:bf16,512x1024:bf16",
        "--lines",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["preset"] == "trn1" and d["kernel"] == "matmul_tiled_kernel"
    # 2 x 2 output tiles of 4 accumulating matmuls each: 2 * 512 * 256 * 1024 flops.
    assert d["tensor_flops"] == 2 * 512 * 256 * 1024
    assert d["latency_us"] > 0 and 0 < d["hfu"] < 1
    assert d["engines"]["TensorE"] > 0 and d["engines"]["DMA (busiest queue)"] > 0
    lines = {(x["src"], x["engine"]) for x in d["lines"]}
    assert any(src.startswith("legacy_kernels.py:") and eng == "TensorE" for src, eng in lines)


def test_bench_text_and_overrides_change_time():
    base = _run(
        "nki",
        "bench",
        f"{QUICKSTART}::scaled_add",
        "--shapes",
        "4096x512:fp32,4096x512:fp32",
        "--json",
    )
    fast = _run(
        "nki",
        "bench",
        f"{QUICKSTART}::scaled_add",
        "--shapes",
        "4096x512:fp32,4096x512:fp32",
        "--json",
        "--set",
        "hbm.bandwidth_gbps=820",
        "--set",
        "dma.engine_bandwidth_gbps=54.4",
    )
    assert base.returncode == 0 and fast.returncode == 0, base.stderr + fast.stderr
    assert json.loads(fast.stdout)["latency_us"] < json.loads(base.stdout)["latency_us"]
    text = _run(
        "nki", "bench", f"{QUICKSTART}::scaled_add", "--shapes", "1000x512:fp32,1000x512:fp32"
    )
    assert text.returncode == 0, text.stderr
    assert "latency" in text.stdout and "VectorE" in text.stdout


def test_run_trace_then_lines(tmp_path):
    trace = tmp_path / "t.json"
    r = _run("run", "--trace", str(trace), str(QUICKSTART))
    assert r.returncode == 0, r.stderr
    assert "matches numpy: True" in r.stdout
    out = _run("nki", "lines", str(trace))
    assert out.returncode == 0, out.stderr
    assert "nki_quickstart.py:" in out.stdout and "VectorE" in out.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["nki", "bench", "nofile.py::k", "--shapes", "1x1"], "nofile.py: no such file"),
        (["nki", "bench", f"{KERNELS}::nope", "--shapes", "1x1"], "has no nope"),
        (["nki", "bench", f"{KERNELS}::softmax_kernel", "--shapes", "1xq"], "malformed shape"),
        (
            ["nki", "bench", f"{KERNELS}::softmax_kernel", "--shapes", "256x64:fp32"],
            "partition-size",
        ),
    ],
)
def test_bad_input_is_one_line(args, message):
    r = _run(*args)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("neuronsim: error: ") and message in lines[0]
