"""Simulated time of collectives (run under torchrun by tests/python/test_distributed.py):
the ranks' clocks meet at each collective, a slow rank shows up as waiting on the others,
wait() orders the current stream after the collective, and an async collective overlaps compute
issued after it. Prints "rank R: timing ok" per rank."""

import neuronsim
import torch
import torch.distributed as dist
from say import leave, say

dist.init_process_group("neuron")
rank, world = dist.get_rank(), dist.get_world_size()
cpu = dist.new_group(backend="gloo")
dev = torch.device("neuron")


def gather(value: float) -> list[float]:
    out = [None] * world
    dist.all_gather_object(out, value, group=cpu)
    return out


def totals() -> dict:
    (core,) = neuronsim._C._collective_totals().keys() or [None]
    return neuronsim._C._collective_totals().get(
        core, {"count": 0, "busy_ns": 0.0, "waited_ns": 0.0}
    )


a = torch.randn(512, 512, device=dev)
x = torch.ones(1 << 16, device=dev)
dist.all_reduce(x)  # first collective: the clocks meet
torch.neuron.synchronize()
start = neuronsim.host_time_ns()

# Rank 1 computes first: everyone else waits for it at the all-reduce.
if rank == 1:
    for _ in range(8):
        a = a @ a * 1e-3
torch.neuron.synchronize()
compute = neuronsim.host_time_ns() - start
before = totals()
dist.all_reduce(x)
y = x * 2  # ordered after the collective on the current stream
torch.neuron.synchronize()
after = totals()
end = neuronsim.host_time_ns()
waited = after["waited_ns"] - before["waited_ns"]
ends, computes, waits = gather(end), gather(compute), gather(waited)
assert len(set(ends)) == 1, f"the ranks' clocks differ after the collective: {ends}"
assert computes[1] > 100_000, computes  # rank 1's matmuls take simulated time
for r in range(world):
    expected = computes[1] - computes[r]
    assert abs(waits[r] - expected) < 1.0, (r, waits, computes)
assert waits[1] == 0.0, waits
assert torch.equal(y.cpu(), torch.full((1 << 16,), 2.0 * world * world))

# wait() orders the stream: work after it starts at the collective's end.
big = torch.ones(4 << 20, device=dev)
torch.neuron.synchronize()
t0 = neuronsim.host_time_ns()
busy0 = totals()["busy_ns"]
dist.all_reduce(big)
z = big + 1
torch.neuron.synchronize()
serial = neuronsim.host_time_ns() - t0
collective = totals()["busy_ns"] - busy0
assert serial >= collective, (serial, collective)

# An async collective overlaps compute issued after it (as NCCL's do on their own stream).
torch.neuron.synchronize()
t0 = neuronsim.host_time_ns()
work = dist.all_reduce(big, async_op=True)
for _ in range(4):
    a = a @ a * 1e-3
torch.neuron.synchronize()
compute_only = neuronsim.host_time_ns() - t0
work.wait()
w = big + 1
torch.neuron.synchronize()
overlapped = neuronsim.host_time_ns() - t0
assert overlapped < compute_only + collective - 1000, (overlapped, compute_only, collective)
assert overlapped >= max(compute_only, collective), (overlapped, compute_only, collective)

# The same program gives the same simulated times (deterministic).
say(
    f"rank {rank}: timing ok (waited {waits[rank] / 1e3:.1f} us, all-reduce 16 MiB "
    f"{collective / 1e3:.1f} us, overlapped {overlapped / 1e3:.1f} us)"
)
leave()
