"""Bad input to the neuron backend is a clear error on every rank, and the group stays usable
(run under torchrun by tests/python/test_distributed.py with the trn1.32xlarge preset). Each rank
sees two NeuronCores, so a tensor can be on the wrong one. Prints "rank R: N errors ok"."""

import os

import neuronsim
import torch
import torch.distributed as dist
from say import leave, say

local = int(os.environ["LOCAL_RANK"])
neuronsim.configure("trn1.32xlarge", visible_cores=[2 * local, 2 * local + 1])
dist.init_process_group("neuron")
rank, world = dist.get_rank(), dist.get_world_size()
mine = torch.device("neuron", torch.neuron.current_device())
other = torch.device("neuron", 1 - torch.neuron.current_device())
checked = 0


def expect(fragments, fn):
    global checked
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        text = str(e)
        missing = [f for f in fragments if f not in text]
        assert not missing, f"rank {rank}: error lacks {missing}:\n{text}"
        checked += 1
        return
    raise AssertionError(f"rank {rank}: no error, expected one mentioning {fragments}")


def still_works():
    x = torch.full((3,), float(rank), device=mine)
    dist.all_reduce(x)
    assert x.cpu().tolist() == [float(sum(range(world)))] * 3, x


assert torch.neuron.device_count() == 2 and torch.neuron.current_device() == local
expect(
    ["got a tensor on neuron:", "each rank's tensors live on its own device", f"rank {rank}"],
    lambda: dist.all_reduce(torch.ones(3, device=other)),
)
expect(
    ["mismatched shapes", "rank 0 has float32[4]", "rank 1 has float32[5]"],
    lambda: dist.all_reduce(torch.ones(4 + rank, device=mine)),
)
still_works()
expect(
    ["mismatched dtypes", "float32[8]", "bfloat16[8]"],
    lambda: dist.all_reduce(
        torch.ones(8, device=mine, dtype=torch.bfloat16 if rank else torch.float32)
    ),
)
expect(
    ["mismatched shapes"],  # large enough to go through Gloo: still caught before any data moves
    lambda: dist.all_gather_into_tensor(
        torch.empty(world * (300000 + rank), device=mine), torch.ones(300000 + rank, device=mine)
    ),
)
still_works()
# Larger than a slot (1 MiB) on one rank only, or on both with different sizes: the receives of
# posted data are up before the agreement check, no rank sends data past it, so they are dropped
# and the group goes on.
expect(
    ["mismatched shapes", "rank 0 has float32[262144]", "rank 1 has float32[524288]"],
    lambda: dist.all_gather_into_tensor(
        torch.empty(world * 262144 * (1 + rank), device=mine),
        torch.ones(262144 * (1 + rank), device=mine),
    ),
)
expect(
    ["mismatched shapes"],
    lambda: dist.all_reduce(torch.ones(300000 + 400000 * rank, device=mine)),
)
still_works()


def gather_agreed(x):
    out = torch.empty(world * x.numel(), dtype=x.dtype, device=mine)
    dist.all_gather_into_tensor(out, x)
    return out


# Posted data of a size the ranks agreed on before goes before the check (posted_data.h). When
# the ranks then disagree, every message posted before the check is completed (the peer's
# unmatched receive gets zeros, its unmatched message a throwaway buffer): the ranks raise and
# the group, and the sizes both remember, stay usable.
agreed = 300000  # 1.2 MB a rank: beyond the 1 MiB slot
for _ in range(2):
    got = gather_agreed(torch.full((agreed,), float(rank), device=mine)).cpu()
    assert got.tolist() == [float(r) for r in range(world) for _ in range(agreed)]
expect(  # rank 0 sends before the check, rank 1 (a new size) after it
    ["mismatched shapes", "rank 0 has float32[300000]", "rank 1 has float32[300001]"],
    lambda: gather_agreed(torch.ones(agreed + rank, device=mine)),
)
expect(  # both send before the check (same bytes), the data lands, the check still fails
    ["mismatched dtypes", "float32[300000]", "int32[300000]"],
    lambda: gather_agreed(torch.ones(agreed, device=mine, dtype=torch.int32 if rank else None)),
)
expect(  # different collectives, one with data of an agreed size, one with a new size
    ["rank 0 called all_gather", "called all_reduce"],
    lambda: gather_agreed(torch.ones(agreed, device=mine))
    if rank == 0
    else dist.all_reduce(torch.ones(2 * agreed, device=mine)),
)
still_works()
got = gather_agreed(torch.full((agreed,), float(rank + 1), device=mine)).cpu()
assert got.tolist() == [float(r + 1) for r in range(world) for _ in range(agreed)]
expect(
    ["rank 0 called all_reduce", "called broadcast", "same collectives in the same order"],
    lambda: dist.all_reduce(torch.ones(2, device=mine))
    if rank == 0
    else dist.broadcast(torch.ones(2, device=mine), 0),
)
still_works()
expect(
    ["ReduceOp.BAND is not supported", "SUM, AVG, PRODUCT, MIN, MAX and PREMUL_SUM"],
    lambda: dist.all_reduce(torch.ones(2, device=mine, dtype=torch.int32), op=dist.ReduceOp.BAND),
)
expect(
    ["ReduceOp.AVG needs a floating-point tensor"],
    lambda: dist.all_reduce(torch.ones(2, device=mine, dtype=torch.int32), op=dist.ReduceOp.AVG),
)
expect(["needs contiguous tensors"], lambda: dist.all_reduce(torch.ones(4, 4, device=mine).t()))
# c10d itself refuses CPU tensors on a neuron-only group, as it does on an nccl one.
expect(["No backend type associated with device type cpu"], lambda: dist.all_reduce(torch.ones(2)))
expect(
    ["split sizes"],
    lambda: dist.all_to_all_single(
        torch.empty(4, device=mine), torch.ones(4, device=mine), [2, 2], [1, 3] if rank else [2, 2]
    ),
)
still_works()
say(f"rank {rank}: {checked} errors ok")
leave()
