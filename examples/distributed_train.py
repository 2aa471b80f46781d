"""Data-parallel training on simulated NeuronCores with torch.distributed.

    torchrun --nproc-per-node 2 examples/distributed_train.py          # plain torchrun
    neuronsim run --nproc-per-node 2 --trace out/dist_trace.json examples/distributed_train.py

Each rank is a process with its own simulated NeuronCore (rank r on core r); gradients are
averaged with all_reduce on the `neuron` backend. Rank 1 gets a 4x larger batch, so the other ranks
wait for it at every all-reduce: the merged trace shows the wait, `neuronsim report` counts it.
"""

import neuronsim
import torch
import torch.distributed as dist

dist.init_process_group("neuron")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)
).to("neuron")
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(3):
    start = neuronsim.simulated_time_ns()
    x = torch.randn(256 * (4 if rank == 1 else 1), 512, device="neuron")
    loss = model(x).square().mean()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
    opt.step()
    opt.zero_grad()
    loss = loss.detach()
    dist.all_reduce(loss, op=dist.ReduceOp.AVG)
    torch.neuron.synchronize()
    if rank == 0:
        ms = (neuronsim.simulated_time_ns() - start) / 1e6
        print(f"step {step}: loss {loss.item():.4f}, simulated {ms:.3f} ms", flush=True)
dist.destroy_process_group()
