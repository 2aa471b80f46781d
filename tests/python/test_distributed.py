"""torch.distributed on simulated NeuronCores: the neuron c10d backend under torchrun.

Each test launches a check script from tests/python/distributed with torchrun (one process per
rank, each with its own simulated device) and asserts on what every rank printed. The scripts
hold the checks (against Gloo on CPU tensors, or a single-process CPU run); launches are few and
each does many checks, because starting ranks is what costs time on a 2-core CI machine.
"""

from __future__ import annotations

import json
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


@pytest.mark.parametrize("nproc", [2, 4])
def test_every_collective_matches_gloo(nproc):
    # 4 ranks on trn1 (2 NeuronCores an instance) span two simulated instances. The sizes straddle
    # a 64 KiB inline threshold (the default, 1 MiB at 4 ranks, would need larger, slower data).
    # Two ranks post all_reduce's data with the header too; more go through Gloo's all_reduce.
    proc = torchrun("collectives_check.py", nproc, env={"NEURON_SIM_CC_INLINE_BYTES": "65536"})
    for line in ranks_say(proc, r"checks passed", nproc):
        assert int(line.split()[2]) > 200, line


def test_clocks_meet_at_collectives():
    ranks_say(torchrun("timing_check.py", 2), r"timing ok", 2)


def test_bad_input_is_a_clear_error_on_every_rank():
    ranks_say(torchrun("errors_check.py", 2), r"15 errors ok", 2)


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


@pytest.mark.parametrize("mode", ["kill", "hang", "kill-large"])
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
        first = "reduce_scatter_tensor" if mode.endswith("-large") else "all_reduce"
        assert f"neuron backend: {first} failed on rank" in message
        # A killed peer closes its sockets: the others notice at once; a stuck one costs the
        # process group's timeout (5 s here).
        assert float(seconds) < (15 if mode == "hang" else 3), raised
    assert elapsed < 120
    assert not _leftovers(marker), _leftovers(marker)


def test_ways_to_pick_the_neuron_backend():
    lines = ranks_say(torchrun("init_check.py", 2), r"init ok", 2)
    # Each rank sees its instance's cores (trn1.2xlarge: 2) and runs on its local rank's,
    # neuron:<local rank>, whether the script named it or set_device(LOCAL_RANK) did.
    assert any("rank 0 on instance 0 core 0: init ok (neuron:0, 2 visible" in ln for ln in lines)
    assert any("rank 1 on instance 0 core 1: init ok (neuron:1, 2 visible" in ln for ln in lines)


def test_visible_cores_place_the_ranks():
    # NEURON_RT_VISIBLE_CORES as the Neuron runtime reads it: both processes see cores 4 and 5 of
    # a trn1.32xlarge and rank r takes neuron:<local rank>, so the ranks sit on cores 4 and 5.
    env = {"NEURON_RT_VISIBLE_CORES": "4-5", "NEURON_SIM_PRESET": "trn1.32xlarge"}
    lines = ranks_say(torchrun("init_check.py", 2, env=env), r"init ok", 2)
    assert any("rank 0 on instance 0 core 4: init ok (neuron:0, 2 visible" in ln for ln in lines)
    assert any("rank 1 on instance 0 core 5: init ok (neuron:1, 2 visible" in ln for ln in lines)


def test_two_nodes_on_loopback():
    # Two torchrun agents, one rank each, as a two-instance job would run: the ranks sit on
    # different simulated instances and their collectives cross the network (EFA).
    port = free_port()

    def node(rank: int) -> subprocess.Popen:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "2",
            "--node-rank",
            str(rank),
            "--nproc-per-node",
            "1",
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            str(port),
            str(SCRIPTS / "init_check.py"),
        ]
        return subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=REPO
        )

    nodes = [node(0), node(1)]
    outs = [p.communicate(timeout=300) for p in nodes]
    for p, (out, err) in zip(nodes, outs, strict=True):
        assert p.returncode == 0, out + err[-4000:]
    text = outs[0][0] + outs[1][0]
    assert "rank 0 on instance 0 core 0: init ok" in text, text
    assert "rank 1 on instance 1 core 0: init ok" in text, text


@pytest.mark.parametrize("nproc", [2, 4])
def test_fsdp2_trains_like_cpu(nproc):
    proc = torchrun("fsdp_check.py", nproc)
    ranks_say(proc, r"fsdp float32 ok", nproc)
    ranks_say(proc, r"fsdp bfloat16 ok", nproc)
    ranks_say(proc, r"fsdp meta init ok", nproc)
    ranks_say(proc, r"ddp ok", nproc)
    assert "Time stats are currently only collected" not in proc.stderr  # the neuron DDP timer


def test_sync_batch_norm_trains_like_batch_norm_on_the_whole_batch():
    """nn.SyncBatchNorm's ops are CUDA-only in PyTorch (no CPU kernel): the device runs them."""
    ranks_say(torchrun("sync_batch_norm_check.py", 2), r"sync batch norm ok", 2)


def test_tensor_parallel_and_dtensor_match_cpu():
    ranks_say(torchrun("tp_check.py", 4), r"tp ok", 4)


def test_compiled_tensor_parallel_mlp_has_its_collectives_between_launches(tmp_path):
    """torch.compile(backend="neuron") of a TP MLP: eager's values and gradients, and each
    functional collective on the timeline after the launch that computed its input."""
    ranks_say(torchrun("compile_tp_check.py", 2, tmp_path), r"compile tp ok", 2)


def test_accelerate_launch_fsdp2_picks_neuron():
    cmd = [
        str(Path(sys.executable).parent / "accelerate"),
        "launch",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--multi_gpu",
        "--main_process_port",
        str(free_port()),
        str(SCRIPTS / "accelerate_check.py"),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=REPO, timeout=600)
    for line in ranks_say(proc, r"accelerate ok", 2):
        rank = line.split(":")[0].removeprefix("rank ")
        # accelerate places each process on torch.device("neuron", LOCAL_RANK), as on CUDA.
        assert f"DistributedType.FSDP, backend neuron, neuron:{rank})" in line, line


EXAMPLE = Path(REPO) / "examples" / "distributed_train.py"


def test_neuronsim_run_under_torchrun_merges_the_rank_traces(tmp_path):
    from neuronsim.cli import ranks, trace_data

    trace = tmp_path / "dist.json"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "neuronsim",
        "run",
        "--trace",
        str(trace),
        str(EXAMPLE),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "merged trace of 2 ranks" in proc.stderr
    merged = trace_data.load(str(trace))
    assert ranks.is_merged(merged)
    events = json.loads(merged.text)["traceEvents"]
    names_of = [e for e in events if e["ph"] == "M"]
    procs = {e["pid"]: e["args"]["name"] for e in names_of if e["name"] == "process_name"}
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"] for e in names_of if e["name"] == "thread_name"
    }
    xs = [e for e in events if e["ph"] == "X"]
    slices = [(procs[e["pid"]], threads.get((e["pid"], e["tid"]), ""), e) for e in xs]
    processes = {p for p, _, _ in slices}
    assert processes == {"rank 0 (instance 0, nc0)", "rank 1 (instance 0, nc1)"}, processes
    rows = {(p.split()[1], row) for p, row, _ in slices}
    assert ("0", "nc0 Collectives pg0") in rows and ("1", "nc1 TensorE") in rows
    names = {e["name"] for _, row, e in slices if row.endswith("Collectives pg0")}
    assert {"all_reduce", "wait all_reduce"} <= names, names
    # Rank 1 computes 4x more: rank 0 waits for it at the all-reduces, rank 1 never waits.
    r0, r1 = ranks.breakdown(ranks.rank_files(merged))
    assert r0["waiting_ns"] > 1e6 and r1["waiting_ns"] == 0.0, (r0, r1)
    assert r0["communication_ns"] == r1["communication_ns"] > 0
    assert abs(r0["simulated_time_ns"] - r1["simulated_time_ns"]) < 0.01 * r0["simulated_time_ns"]
    report = subprocess.run(
        [sys.executable, "-m", "neuronsim", "report", str(trace), "--top", "3"],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=REPO,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    assert "Ranks (2): compute, communication and waiting" in report.stdout
    assert re.search(r"^\s+0\s+i0 nc0\s+.*ms \(\d+\.\d%\)", report.stdout, re.M), report.stdout


def _whatif_sweep(tmp_path, args, env=None):
    """Runs `neuronsim whatif` over 2 ranks of the distributed example with `args` (one
    two-valued --sweep) and returns the simulated time of its two rows."""
    cmd = [sys.executable, "-m", "neuronsim", "whatif", *args, "--nproc-per-node", "2"]
    cmd += ["--jobs", "2", "--csv", str(tmp_path / "w.csv"), str(EXAMPLE)]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env or _env(), cwd=REPO, timeout=900
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    rows = (tmp_path / "w.csv").read_text().splitlines()[1:]
    first, second = (float(r.split(",")[1]) for r in rows)
    return first, second


def test_whatif_changes_collective_time(tmp_path):
    fast, slow = _whatif_sweep(tmp_path, ["--sweep", "collectives.step_latency_ns=3200,200000"])
    # 15 all-reduces of 2 ring steps each: every step 196.8 us slower.
    assert slow - fast == pytest.approx(15 * 2 * 196800, rel=0.01), (fast, slow)


def test_whatif_link_bandwidth_changes_collective_time(tmp_path):
    # Ranks on cores 0 and 2 of a trn1.32xlarge: chips 0 and 1, one NeuronLink apart. At 1 GB/s
    # the link bounds the 2-rank ring all-reduce (two steps of half the bytes each way: 1 ns a
    # byte); at 103.1 GB/s the collective DMA does (85 GB/s, the reduce step at half rate).
    fast, slow = _whatif_sweep(
        tmp_path,
        ["--preset", "trn1.32xlarge", "--set", "collectives.algorithm=ring"]
        + ["--sweep", "neuronlink.link_bandwidth_gbps=103.1,1"],
        _env({"NEURON_RT_VISIBLE_CORES": "0,2"}),
    )
    # The example all-reduces its gradients (512x2048 + 2048 + 2048x512 + 512 floats) and the
    # loss, 3 steps.
    reduced = 3 * (4 * (512 * 2048 + 2048 + 2048 * 512 + 512) + 4)
    per_byte_fast = 0.5 / 42.5 + 0.5 / 85  # ns a byte: reduce-scatter half, all-gather half
    assert slow - fast == pytest.approx(reduced * (1 - per_byte_fast), rel=0.01), (fast, slow)


def test_fewer_processes_time_the_same_collectives(tmp_path):
    # The benchmark's --processes (NEURON_SIM_CC_MODEL_RANKS): 2 processes standing for 4 ranks
    # give the 4-rank job's simulated times, for every collective of the benchmark.
    bench = Path(REPO) / "bench" / "collective_bench.py"
    runs = {}
    for procs in (4, 2):
        out = tmp_path / f"b{procs}.json"
        cmd = [
            sys.executable,
            str(bench),
            "--ranks",
            "4",
            "--processes",
            str(procs),
            "--max",
            "256K",
            "--factor",
            "16",
            "--iters",
            "1",
            "--json",
            str(out),
        ]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=_env(), cwd=REPO, timeout=600
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
        runs[procs] = {
            (r["op"], r["size"]): r["simulated_us"] for r in json.loads(out.read_text())["results"]
        }
    assert runs[4] and runs[4] == runs[2], runs
