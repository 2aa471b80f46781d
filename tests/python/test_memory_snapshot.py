"""torch.neuron.memory_snapshot(): the caching allocator's segments and blocks in the form
torch.cuda.memory_snapshot() returns them, so CUDA's tooling (torch.cuda._memory_viz) reads it."""

import torch
import torch.cuda._memory_viz as memory_viz

MiB = 1 << 20
SEGMENT_KEYS = {
    "device",
    "address",
    "total_size",
    "allocated_size",
    "active_size",
    "requested_size",
    "stream",
    "segment_type",
    "segment_pool_id",
    "is_expandable",
    "frames",
    "blocks",
}
BLOCK_KEYS = {"address", "size", "requested_size", "state", "frames"}


def _block_of(snapshot, ptr):
    for seg in snapshot:
        for b in seg["blocks"]:
            if b["address"] == ptr:
                return seg, b
    return None, None


def test_segments_have_cudas_keys_and_add_up_to_the_memory_stats():
    keep = [torch.empty(n, dtype=torch.uint8, device="neuron") for n in (1000, 3 * MiB, 12 * MiB)]
    torch.neuron.synchronize()
    snap = torch.neuron.memory_snapshot()
    assert snap and all(set(seg) == SEGMENT_KEYS for seg in snap)
    assert all(set(b) == BLOCK_KEYS for seg in snap for b in seg["blocks"])
    for dev in range(torch.neuron.device_count()):
        mine = [s for s in snap if s["device"] == dev]
        assert sum(s["total_size"] for s in mine) == torch.neuron.memory_reserved(dev)
        assert sum(s["allocated_size"] for s in mine) == torch.neuron.memory_allocated(dev)
    stats = torch.neuron.memory_stats()
    assert len(snap) == sum(
        torch.neuron.memory_stats(d)["segment.all.current"]
        for d in range(torch.neuron.device_count())
    )
    assert (
        sum(s["requested_size"] for s in snap if s["device"] == 0)
        == (stats["requested_bytes.all.current"])
    )
    for seg in snap:
        # Blocks tile their segment in address order.
        addr = seg["address"]
        for b in seg["blocks"]:
            assert b["address"] == addr and b["size"] > 0
            assert b["state"] in ("active_allocated", "inactive")
            addr += b["size"]
        assert addr == seg["address"] + seg["total_size"]
        assert seg["segment_type"] == ("small" if seg["total_size"] == 2 * MiB else "large")
    del keep


def test_a_tensor_is_an_active_block_at_its_data_ptr_until_freed():
    x = torch.empty(3 * MiB + 100, dtype=torch.uint8, device="neuron:1")
    seg, block = _block_of(torch.neuron.memory_snapshot(), x.data_ptr())
    assert block is not None and seg["device"] == 1 and seg["segment_type"] == "large"
    assert block["state"] == "active_allocated"
    assert block["requested_size"] == 3 * MiB + 100
    assert block["size"] == (3 * MiB + 100 + 511) // 512 * 512
    ptr = x.data_ptr()
    del x
    seg, block = _block_of(torch.neuron.memory_snapshot(), ptr)
    assert block is not None and block["state"] == "inactive"  # cached, not returned
    torch.neuron.empty_cache()
    assert all(
        not (s["address"] <= ptr < s["address"] + s["total_size"])
        for s in torch.neuron.memory_snapshot()
    )


def test_accepts_cudas_arguments():
    x = torch.empty(1000, device="neuron")
    default = torch.neuron.memory_snapshot()
    assert torch.neuron.memory_snapshot(include_traces=False) == default
    assert torch.neuron.memory_snapshot(None, True) == default
    assert torch.neuron.memory_snapshot(mempool_id=(0, 0)) == default
    assert torch.neuron.memory_snapshot(mempool_id=(1, 7)) == []  # no such pool, as on CUDA
    del x


def test_cuda_memory_viz_reads_it():
    x = torch.empty(5 * MiB, dtype=torch.uint8, device="neuron")
    snap = torch.neuron.memory_snapshot()
    # segsum checks that every segment's blocks account for its size, and prints the totals.
    summary = memory_viz.segsum({"segments": snap})
    reserved = sum(torch.neuron.memory_reserved(d) for d in range(torch.neuron.device_count()))
    assert f"segments: {len(snap)}\n" in summary
    assert f"total_reserved: {memory_viz.Bytes(reserved)}\n" in summary
    del x
