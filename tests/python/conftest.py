"""Shared fixtures for the Python tests of the neuron device.

Every test module imports neuronsim through this file. Tests that need a different simulator
configuration (preset, visible cores, environment variables) run their code in a subprocess
with ``run_python``: the simulated device is configured once per process.
"""

import os
import subprocess
import sys
import textwrap

import neuronsim  # noqa: F401  (registers the neuron device)
import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def _clear_op_tracking():
    neuronsim.clear_op_tracking()
    yield


def run_python(
    code: str, env: dict | None = None, timeout: int = 300
) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (with this venv) and returns the completed process."""
    full_env = dict(os.environ)
    for k in list(full_env):
        if k.startswith("NEURON_"):
            del full_env[k]
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=REPO,
    )


@pytest.fixture
def neuron():
    return torch.device("neuron")
