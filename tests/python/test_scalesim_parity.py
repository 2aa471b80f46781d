"""SCALE-Sim parity by simulation: with tensor.timing_mode=scalesim, TensorE's simulated cycle
count for a GEMM run in SCALE-Sim's weight-stationary dataflow (`ncsim scalesim`) equals the
"Total Cycles" SCALE-Sim 3.0.0 itself reports for the same GEMM, exactly.

SCALE-Sim comes from PyPI into its own venv (it needs numpy<2, the test venv has numpy 2),
kept under the build directory so later runs reuse it. Its config, layout and topology files
are the ones `ncsim scalesim` writes; one SCALE-Sim run covers every shape (~20 s).
"""

import csv
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("BUILD_DIR", REPO / "build"))
if not BUILD.is_absolute():
    BUILD = REPO / BUILD
NCSIM = BUILD / "tools" / "ncsim"
SCALESIM = "scalesim==3.0.0"
VENV = BUILD / "scalesim-3.0.0-venv"

# (M, N, K) in SCALE-Sim's names: C[M, N] = A[M, K] B[K, N]. Non-multiples of the 128 x 128
# array, one-element GEMMs, several folds each way, and M beyond PSUM (SBUF accumulation).
SHAPES = [
    (128, 128, 128),
    (512, 256, 384),
    (100, 200, 300),
    (1, 1, 1),
    (64, 130, 129),
    (300, 128, 256),
    (700, 64, 200),
    (33, 300, 77),
    (600, 1, 150),
    (4200, 16, 16),
]


def pypi_unreachable() -> str:
    """Why PyPI cannot be reached from here, or "" when it can."""
    try:
        socket.create_connection(("pypi.org", 443), timeout=10).close()
    except OSError as e:
        return f"pypi.org:443 unreachable ({e})"
    return ""


def scalesim_python() -> Path:
    python = VENV / "bin" / "python"
    marker = VENV / "installed"
    if not marker.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", VENV], check=True)
        pip = subprocess.run(
            [python, "-m", "pip", "install", "-q", SCALESIM, "numpy<2"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if pip.returncode != 0:
            # Only a machine without network skips; any other install failure fails the test.
            offline = pypi_unreachable()
            if offline:
                pytest.skip(f"cannot install {SCALESIM} from PyPI: {offline}")
            pytest.fail(f"pip install {SCALESIM} failed:\n{pip.stdout[-2000:]}{pip.stderr[-2000:]}")
        marker.write_text(SCALESIM + "\n")
    return python


def ncsim_cycles(shape, out):
    m, n, k = shape
    r = subprocess.run(
        [NCSIM, "scalesim", "--m", str(m), "--n", str(n), "--k", str(k), "-o", out],
        capture_output=True,
        text=True,
        check=True,
    )
    sim = re.search(r"timing_mode=scalesim:\s+(\d+) TensorE cycles", r.stdout)
    assert sim, r.stdout
    return int(sim.group(1))


def test_tensor_engine_cycles_equal_scalesim_total_cycles(tmp_path):
    assert NCSIM.exists(), f"{NCSIM} is not built (BUILD_DIR={BUILD})"
    python = scalesim_python()
    simulated = [ncsim_cycles(s, tmp_path / "export") for s in SHAPES]
    export = tmp_path / "export"
    # One topology with every shape, in the format ncsim wrote for the last one.
    rows = "".join(f"gemm{i}, {m}, {n}, {k},\n" for i, (m, n, k) in enumerate(SHAPES))
    (export / "topology.csv").write_text("Layer Name, M, N, K,\n" + rows)
    run = subprocess.run(
        [
            python,
            "-m",
            "scalesim.scale",
            "-c",
            export / "scalesim.cfg",
            "-t",
            export / "topology.csv",
            "-l",
            export / "layout.csv",
            "-p",
            tmp_path / "run",
            "-i",
            "gemm",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    (report,) = (tmp_path / "run").glob("*/COMPUTE_REPORT.csv")
    with report.open() as f:
        reported = [int(r[" Total Cycles"]) for r in csv.DictReader(f)]
    assert len(reported) == len(SHAPES)
    mismatches = [(s, a, b) for s, a, b in zip(SHAPES, simulated, reported, strict=True) if a != b]
    assert not mismatches, f"(M, N, K), neuronsim, SCALE-Sim: {mismatches}"


@pytest.mark.parametrize("preset", ["trn1", "trn2"])
def test_ncsim_scalesim_names_follow_scalesim_topology(tmp_path, preset):
    """--m is SCALE-Sim's M (streamed rows), --n its N (filters), in the topology it writes."""
    out = tmp_path / "x"
    subprocess.run(
        [NCSIM, "scalesim", "--preset", preset, "--m", "300", "--n", "20", "--k", "7", "-o", out],
        capture_output=True,
        check=True,
    )
    lines = (out / "topology.csv").read_text().splitlines()
    assert lines == ["Layer Name, M, N, K,", "gemm, 300, 20, 7,"]
