"""The program cache (runtime/program_cache.h): a repeated op reuses its built, validated
programs, moved to the new tensors' memory, with the same simulated time, trace and values as
building them afresh (NEURONSIM_PROGRAM_CACHE=0), in fast and in ISA mode."""

import json
import os
import subprocess
import sys

import pytest

CHILD = r"""
import json, sys
import torch, neuronsim
from neuronsim import _C, tracing

torch.manual_seed(0)
tracing.start(sys.argv[1], module_ranges=False)
w = torch.randn(48, 40).to("neuron")
outs = []
for i in range(4):  # fresh tensors each time: the cached programs move to their memory
    x = torch.randn(37, 48).to("neuron")
    y = (x * 0.5 + 1.0).relu() - x
    z = torch.softmax(y @ w, dim=-1)
    n = torch.nn.functional.layer_norm(z, (40,))
    s = n.sum(dim=0)
    y.add_(2.0)
    outs.append(torch.cat([n.flatten(), s, y.flatten()]).cpu())
torch.neuron.synchronize()
tracing.stop()
stats = _C._program_cache_stats()
_C._set_isa_mode(not _C._isa_mode())  # a configuration change drops every cached program
print(json.dumps({
    "device_ns": neuronsim.simulated_time_ns(),
    "values": torch.stack(outs).tolist(),
    "hits": stats[0], "size": stats[2], "size_after_mode_change": _C._program_cache_stats()[2],
}))
"""


def run(tmp_path, cache: bool, mode: str):
    trace = tmp_path / f"trace_{cache}_{mode}.json"
    env = dict(os.environ, NEURONSIM_PROGRAM_CACHE="1" if cache else "0", NEURON_SIM_MODE=mode)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(trace)], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    events = json.loads(trace.read_text())["traceEvents"]
    result["slices"] = [
        (e["name"], e["ts"], e.get("dur"), e["pid"], e["tid"]) for e in events if e["ph"] == "X"
    ]
    return result


@pytest.mark.parametrize("mode", ["fast", "isa"])
def test_cached_launches_match_uncached(tmp_path, mode):
    cached, fresh = run(tmp_path, True, mode), run(tmp_path, False, mode)
    assert cached["hits"] >= 3 * 7  # every op of iterations 2-4 came from the cache
    assert fresh["hits"] == 0 and fresh["size"] == 0
    assert cached["device_ns"] == fresh["device_ns"]
    assert cached["values"] == fresh["values"]
    assert len(cached["slices"]) > 100
    assert cached["slices"] == fresh["slices"]
    assert cached["size"] > 0 and cached["size_after_mode_change"] == 0
