"""torch.distributed on simulated NeuronCores: the neuron c10d backend under torchrun.

Each test launches a check script from tests/python/distributed with torchrun (one process per
rank, each with its own simulated device) and asserts on what every rank printed. The scripts
hold the checks (against Gloo on CPU tensors, or a single-process CPU run); launches are few and
each does many checks, because starting ranks is what costs time on a 2-core CI machine.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

SCRIPTS = Path(__file__).parent / "distributed"


def _env(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON")}
    env.update({"OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"})
    env.update(extra or {})
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(
    script: str,
    nproc: int,
    *args,
    env: dict | None = None,
    launcher: list | None = None,
    timeout: int = 600,
) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        *(launcher or ["--standalone"]),
        "--nproc-per-node",
        str(nproc),
        str(SCRIPTS / script),
        *map(str, args),
    ]
    return subprocess.run(
        cmd, capture_output=True, text=True, env=_env(env), cwd=REPO, timeout=timeout
    )


def ranks_say(proc: subprocess.CompletedProcess, pattern: str, nproc: int) -> list[str]:
    lines = [ln for ln in proc.stdout.splitlines() if re.search(pattern, ln)]
    assert proc.returncode == 0 and len(lines) >= nproc, (
        f"exit {proc.returncode}; expected {nproc} lines matching {pattern!r}\n"
        f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-6000:]}"
    )
    return lines


def test_every_collective_matches_gloo():
    # 4 ranks on trn1 (2 NeuronCores an instance) span two simulated instances.
    proc = torchrun("collectives_check.py", 4)
    for line in ranks_say(proc, r"checks passed", 4):
        assert int(line.split()[2]) > 200, line


def test_clocks_meet_at_collectives():
    ranks_say(torchrun("timing_check.py", 2), r"timing ok", 2)


def test_bad_input_is_a_clear_error_on_every_rank():
    ranks_say(torchrun("errors_check.py", 2), r"10 errors ok", 2)


def _leftovers(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline and "pytest" not in cmdline:
            found.append(f"{pid}: {cmdline}")
    return found


@pytest.mark.parametrize("mode", ["kill", "hang"])
def test_a_dead_or_stuck_rank_makes_the_others_raise(mode):
    marker = f"fault-{mode}-{os.getpid()}"
    start = time.monotonic()
    proc = torchrun(
        "fault_check.py",
        3,
        mode,
        5,
        marker,
        launcher=["--standalone", "--monitor-interval", "2"],
        timeout=180,
    )
    elapsed = time.monotonic() - start
    assert proc.returncode != 0
    raised = re.findall(r"rank (\d) raised after ([\d.]+) s: DistBackendError: (.*)", proc.stdout)
    assert sorted(r for r, _, _ in raised) == ["0", "2"], proc.stdout + proc.stderr[-3000:]
    for _, seconds, message in raised:
        assert "neuron backend: all_reduce failed on rank" in message
        # A killed peer closes its sockets: the others notice at once; a stuck one costs the
        # process group's timeout (5 s here).
        assert float(seconds) < (3 if mode == "kill" else 15), raised
    assert elapsed < 120
    assert not _leftovers(marker), _leftovers(marker)
