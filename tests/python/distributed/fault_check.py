"""A rank that dies or hangs mid-step (run under torchrun by tests/python/test_distributed.py):
the other ranks raise instead of hanging. Usage: fault_check.py kill|hang[-large] TIMEOUT_S.
Rank 1 is killed (SIGKILL) or stops (sleeps) in step 3 of a small data-parallel loop; every other
rank prints "rank R raised after S s: <error>" and exits with code 3. With -large, every step
also reduce-scatters and all-gathers 1.6 MB a rank (FSDP-style), data posted with the header in
several messages, and rank 1 stops before those."""

import datetime
import os
import signal
import sys
import time

import neuronsim  # noqa: F401
import torch
import torch.distributed as dist
from say import say

mode, timeout = sys.argv[1], float(sys.argv[2])  # argv[3]: a marker for the test
mode, large = mode.removesuffix("-large"), mode.endswith("-large")
dist.init_process_group("neuron", timeout=datetime.timedelta(seconds=timeout))
rank = dist.get_rank()
model = torch.nn.Linear(64, 64).to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
began = None
try:
    for step in range(6):
        began = time.monotonic()
        loss = model(torch.randn(8, 64, device="neuron")).square().mean()
        loss.backward()
        if large and not (rank == 1 and step == 3):
            world = dist.get_world_size()
            flat = torch.randn(world * 400_000, device="neuron")
            shard = torch.empty(400_000, device="neuron")
            dist.reduce_scatter_tensor(shard, flat)
            dist.all_gather_into_tensor(flat, shard)
        if rank == 1 and step == 3:
            say(f"rank 1 {'killed' if mode == 'kill' else 'stuck'} in step {step}")
            if mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(3600)
        for p in model.parameters():
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
        opt.step()
        opt.zero_grad()
except Exception as e:  # noqa: BLE001
    first = str(e).strip().splitlines()[0]
    say(f"rank {rank} raised after {time.monotonic() - began:.1f} s: {type(e).__name__}: {first}")
    os._exit(3)
say(f"rank {rank} finished without noticing")
