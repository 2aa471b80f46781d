"""Device memory: the caching allocator's statistics (CUDA's names), out-of-memory errors, and
pinned host memory."""

import neuronsim
import pytest
import torch
from conftest import run_python

MiB = 1 << 20
GiB = 1 << 30


def _sync_stats(dev=0):
    torch.neuron.synchronize()
    return torch.neuron.memory_stats(dev)


def test_memory_allocated_tracks_tensors():
    base = torch.neuron.memory_allocated()
    x = torch.empty(4 * MiB, dtype=torch.uint8, device="neuron")
    assert torch.neuron.memory_allocated() - base >= 4 * MiB
    assert torch.neuron.memory_allocated() - base < 4 * MiB + 64 * 1024
    assert torch.neuron.max_memory_allocated() >= torch.neuron.memory_allocated()
    assert torch.neuron.memory_reserved() >= torch.neuron.memory_allocated()
    del x
    assert torch.neuron.memory_allocated() == base


def test_memory_is_per_device():
    base0, base1 = torch.neuron.memory_allocated(0), torch.neuron.memory_allocated(1)
    y = torch.empty(2 * MiB, dtype=torch.uint8, device="neuron:1")
    assert torch.neuron.memory_allocated(1) - base1 >= 2 * MiB
    assert torch.neuron.memory_allocated(0) == base0
    assert torch.neuron.memory_allocated("neuron:1") == torch.neuron.memory_allocated(1)
    del y
    assert torch.neuron.memory_allocated(1) == base1


def test_peak_and_reset_peak():
    torch.neuron.reset_peak_memory_stats()
    base = torch.neuron.memory_allocated()
    assert torch.neuron.max_memory_allocated() == base
    x = torch.empty(8 * MiB, dtype=torch.uint8, device="neuron")
    del x
    peak = torch.neuron.max_memory_allocated()
    assert peak >= base + 8 * MiB
    assert torch.neuron.memory_allocated() == base
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == base
    assert torch.neuron.max_memory_reserved() == torch.neuron.memory_reserved()


def test_empty_cache_releases_unused_segments():
    x = torch.empty(64 * MiB, dtype=torch.uint8, device="neuron")
    reserved_with_x = torch.neuron.memory_reserved()
    del x
    assert torch.neuron.memory_reserved() == reserved_with_x  # cached, not returned
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() <= reserved_with_x - 64 * MiB
    assert torch.neuron.memory_reserved() >= torch.neuron.memory_allocated()


def test_mem_get_info():
    free, total = torch.neuron.mem_get_info()
    assert total == torch.neuron.get_device_properties(0).total_memory == 16 * GiB
    assert free == total - torch.neuron.memory_reserved()
    x = torch.empty(32 * MiB, dtype=torch.uint8, device="neuron")
    free2, total2 = torch.neuron.mem_get_info(0)
    assert total2 == total and free2 <= free - 32 * MiB
    assert torch.accelerator.get_memory_info(0) == (free2, total2)
    del x


CUDA_KEYS = [
    f"{stat}.{pool}.{metric}"
    for stat in (
        "allocation",
        "segment",
        "active",
        "inactive_split",
        "allocated_bytes",
        "reserved_bytes",
        "active_bytes",
        "inactive_split_bytes",
        "requested_bytes",
    )
    for pool in ("all", "small_pool", "large_pool")
    for metric in ("current", "peak", "allocated", "freed")
] + ["num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free"]


def test_memory_stats_has_cuda_keys():
    x = torch.empty(3 * MiB, dtype=torch.uint8, device="neuron")
    s = _sync_stats()
    missing = [k for k in CUDA_KEYS if k not in s]
    assert not missing
    assert s["allocated_bytes.all.current"] == torch.neuron.memory_allocated()
    assert s["allocated_bytes.all.peak"] == torch.neuron.max_memory_allocated()
    assert s["reserved_bytes.all.current"] == torch.neuron.memory_reserved()
    assert s["allocation.all.current"] >= 1
    assert s["allocated_bytes.large_pool.current"] >= 3 * MiB
    assert s["requested_bytes.all.current"] <= s["allocated_bytes.all.current"]
    assert (
        s["allocated_bytes.all.current"]
        == s["allocated_bytes.small_pool.current"] + s["allocated_bytes.large_pool.current"]
    )
    del x


def test_accelerator_memory_api_agrees():
    x = torch.empty(5 * MiB, dtype=torch.uint8, device="neuron")
    y = torch.empty(1000, device="neuron:1")
    for dev in (0, 1):
        assert torch.accelerator.memory_allocated(dev) == torch.neuron.memory_allocated(dev)
        assert torch.accelerator.max_memory_allocated(dev) == torch.neuron.max_memory_allocated(dev)
        assert torch.accelerator.memory_reserved(dev) == torch.neuron.memory_reserved(dev)
        assert torch.accelerator.max_memory_reserved(dev) == torch.neuron.max_memory_reserved(dev)
    del x, y


def test_accelerator_memory_stats_equal_neuron_memory_stats():
    x = torch.empty(5 * MiB, dtype=torch.uint8, device="neuron")
    diffs = {}
    for dev in (0, 1):
        # torch.neuron's also has TorchNeuron's keys (nested byte statistics, two counters).
        ours = {
            k: v
            for k, v in torch.neuron.memory_stats(dev).items()
            if not isinstance(v, dict) and k not in ("num_tensor_frees", "allocation_requests")
        }
        theirs = dict(torch.accelerator.memory_stats(dev))
        for k in sorted(set(ours) | set(theirs)):
            if ours.get(k, "<missing>") != theirs.get(k, "<missing>"):
                diffs[(dev, k)] = (ours.get(k, "<missing>"), theirs.get(k, "<missing>"))
    del x
    # (device, key): (torch.neuron.memory_stats, torch.accelerator.memory_stats)
    assert diffs == {}


def test_accelerator_reset_and_empty_cache_reach_the_neuron_allocator():
    torch.neuron.empty_cache()
    reserved = torch.neuron.memory_reserved(0)
    x = torch.empty(16 * MiB, dtype=torch.uint8, device="neuron")
    del x
    assert torch.neuron.memory_reserved(0) >= reserved + 16 * MiB
    torch.accelerator.reset_peak_memory_stats(0)
    assert torch.neuron.max_memory_allocated(0) == torch.neuron.memory_allocated(0)
    torch.accelerator.empty_cache()
    assert torch.neuron.memory_reserved(0) == reserved


def test_reset_accumulated_memory_stats():
    x = torch.empty(1000, device="neuron")
    del x
    assert torch.neuron.memory_stats()["allocation.all.allocated"] >= 1
    torch.neuron.reset_accumulated_memory_stats()
    s = torch.neuron.memory_stats()
    assert s["allocation.all.allocated"] == 0 and s["allocation.all.freed"] == 0
    assert s["allocated_bytes.all.current"] == torch.neuron.memory_allocated()


def test_freed_blocks_are_reused():
    torch.neuron.empty_cache()
    x = torch.empty(16 * MiB, dtype=torch.uint8, device="neuron")
    ptr = x.data_ptr()
    reserved = torch.neuron.memory_reserved()
    segments = torch.neuron.memory_stats()["num_device_alloc"]
    del x
    for _ in range(5):
        y = torch.empty(16 * MiB, dtype=torch.uint8, device="neuron")
        assert y.data_ptr() == ptr
        del y
    assert torch.neuron.memory_reserved() == reserved
    assert torch.neuron.memory_stats()["num_device_alloc"] == segments


def test_small_allocations_share_a_segment():
    torch.neuron.empty_cache()
    before = torch.neuron.memory_stats()["segment.small_pool.current"]
    xs = [torch.empty(256, device="neuron") for _ in range(32)]
    after = torch.neuron.memory_stats()["segment.small_pool.current"]
    assert after - before <= 1
    assert len({x.data_ptr() for x in xs}) == 32
    del xs


# ---------------------------------------------------------------------------------------------
# Pinned host memory.


def test_pinned_memory():
    p = torch.empty(1000, pin_memory=True)
    assert p.is_pinned()
    assert p.device.type == "cpu"
    q = torch.randn(1000).pin_memory()
    assert q.is_pinned()
    assert q[10:].is_pinned()
    assert not torch.randn(10).is_pinned()
    assert not torch.ones(3, device="neuron").is_pinned()


def test_non_blocking_copies_from_and_to_pinned_memory():
    src = torch.randn(256, 1024).pin_memory()
    d = src.to("neuron", non_blocking=True)
    torch.neuron.synchronize()
    assert torch.equal(d.cpu(), src)
    d2 = torch.empty(256, 1024, device="neuron")
    d2.copy_(src, non_blocking=True)
    back = torch.empty(256, 1024, pin_memory=True)
    back.copy_(d2 * 2, non_blocking=True)
    torch.neuron.synchronize()
    assert torch.equal(back, src * 2)


def test_non_blocking_copy_from_pinned_memory_does_not_block_the_host():
    src = torch.randn(4 * MiB).pin_memory()  # 16 MiB
    torch.neuron.synchronize()
    h0 = neuronsim.host_time_ns()
    d = src.to("neuron", non_blocking=True)
    h1 = neuronsim.host_time_ns()
    torch.neuron.synchronize()
    h2 = neuronsim.host_time_ns()
    e = src.to("neuron")
    h3 = neuronsim.host_time_ns()
    # The blocking copy waits for the transfer over the host link; the async one returns at once.
    assert h3 - h2 > 10 * (h1 - h0)
    assert h2 > h1  # the transfer was still running
    assert torch.equal(d.cpu(), e.cpu())


def test_dataloader_pin_memory():
    ds = torch.utils.data.TensorDataset(torch.arange(8.0))
    batches = list(torch.utils.data.DataLoader(ds, batch_size=4, pin_memory=True))
    assert all(b[0].is_pinned() for b in batches)
    assert torch.cat(
        [b[0].to("neuron", non_blocking=True) for b in batches]
    ).cpu().tolist() == list(map(float, range(8)))


# ---------------------------------------------------------------------------------------------
# Out of memory (1 GiB of HBM per core, fresh interpreter).

_OOM = """
    import json, torch, neuronsim
    MiB, GiB = 1 << 20, 1 << 30
    out = {"total": torch.neuron.get_device_properties(0).total_memory}
    try:
        torch.empty(GiB + 64 * MiB, dtype=torch.uint8, device="neuron")
        out["too_big"] = "no error"
    except torch.OutOfMemoryError as e:
        out["too_big"] = str(e)
        out["too_big_is_runtime_error"] = isinstance(e, RuntimeError)
    a = torch.empty(600 * MiB, dtype=torch.uint8, device="neuron")
    try:
        b = torch.empty(600 * MiB, dtype=torch.uint8, device="neuron")
        out["second"] = "no error"
    except torch.OutOfMemoryError as e:
        out["second"] = str(e)
    out["num_ooms"] = torch.neuron.memory_stats()["num_ooms"]
    # The device stays usable.
    c = torch.arange(1000.0, device="neuron")
    out["sum"] = (c * 2).sum().item()
    del a
    b = torch.empty(600 * MiB, dtype=torch.uint8, device="neuron")
    b.fill_(7)
    out["b"] = int(b[-1].item())
    del b, c
    out["allocated_after_free"] = torch.neuron.memory_allocated()
    # Cached (freed) blocks are released and the allocation retried before giving up.
    a = torch.empty(600 * MiB, dtype=torch.uint8, device="neuron")
    del a
    out["cached"] = torch.neuron.memory_reserved() >= 600 * MiB
    retries = torch.neuron.memory_stats()["num_alloc_retries"]
    try:
        d = torch.empty(700 * MiB, dtype=torch.uint8, device="neuron")
        out["after_retry"] = "ok"
        del d
    except torch.OutOfMemoryError as e:
        out["after_retry"] = str(e)
    out["retries"] = torch.neuron.memory_stats()["num_alloc_retries"] - retries
    print(json.dumps(out))
"""


@pytest.fixture(scope="module", autouse=True)
def oom_run():  # autouse: starts with the module's first test
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1)
    fut = pool.submit(run_python, _OOM, {"NEURON_SIM_SET": "hbm.capacity_gib=1"})
    yield fut
    pool.shutdown(wait=True)


def test_out_of_memory(oom_run):
    import json

    r = oom_run.result()
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["total"] == GiB
    msg = out["too_big"]
    assert msg != "no error"
    assert out["too_big_is_runtime_error"]
    assert "Tried to allocate" in msg and "GiB" in msg
    assert "total capacity of 1.00 GiB" in msg
    assert "free" in msg
    second = out["second"]
    assert "Tried to allocate 600.00 MiB" in second
    assert "424.00 MiB is free" in second  # 1024 - 600
    assert out["num_ooms"] == 2
    assert out["sum"] == 999000.0
    assert out["b"] == 7
    assert out["allocated_after_free"] == 0
    assert out["cached"]
    assert out["after_retry"] == "ok"
    assert out["retries"] == 1
