"""Tensor parallelism and DTensor on the neuron backend against CPU (run with 4 ranks under
torchrun by tests/python/test_distributed.py): distribute_tensor / redistribute / full_tensor;
parallelize_module with ColwiseParallel, RowwiseParallel and SequenceParallel on an MLP and an
attention block; FSDP2 + TP on a 2 x 2 mesh; DTensor random ops. Prints "rank R: tp ok ..."."""

import copy

import neuronsim  # noqa: F401
import torch
import torch.distributed as dist
from say import leave, say
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

dist.init_process_group("neuron")
rank, world = dist.get_rank(), dist.get_world_size()
assert world == 4, "tp_check runs on 4 ranks"
dev = torch.device("neuron")
mesh = init_device_mesh("neuron", (world,), mesh_dim_names=("tp",))
mesh2 = init_device_mesh("neuron", (2, 2), mesh_dim_names=("dp", "tp"))
checks = 0


def close(name, got, want, tol=1e-5):
    global checks
    got = got.full_tensor() if isinstance(got, DTensor) else got
    got = got.detach().cpu().float()
    want = want.detach().float()
    assert got.shape == want.shape, (name, got.shape, want.shape)
    diff = (got - want).abs().max().item()
    assert diff <= tol * max(1.0, want.abs().max().item()), f"rank {rank} {name}: max diff {diff}"
    checks += 1


# distribute_tensor, redistribute, full_tensor on 1-D and 2-D meshes.
torch.manual_seed(0)
full = torch.randn(8, 12)
for placements, m in [
    ([Shard(0)], mesh),
    ([Shard(1)], mesh),
    ([Replicate()], mesh),
    ([Shard(0), Shard(1)], mesh2),
    ([Replicate(), Shard(0)], mesh2),
]:
    d = distribute_tensor(full.to(dev), m, placements)
    close(f"full_tensor {placements}", d, full)
    close(f"to replicate {placements}", d.redistribute(m, [Replicate()] * m.ndim).to_local(), full)
    close(f"to shard(1) {placements}", d.redistribute(m, [Shard(1)] * m.ndim), full)
partial = DTensor.from_local(torch.full((4, 4), float(rank), device=dev), mesh, [Partial()])
close(
    "partial -> replicate",
    partial.redistribute(mesh, [Replicate()]).to_local(),
    torch.full((4, 4), float(sum(range(world)))),
)
close(
    "partial -> shard",
    partial.redistribute(mesh, [Shard(0)]),
    torch.full((4, 4), float(sum(range(world)))),
)


class MLP(torch.nn.Module):
    def __init__(self, d=16, h=32):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(d, h), torch.nn.Linear(h, d)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


class Attention(torch.nn.Module):
    def __init__(self, d=16, heads=4):
        super().__init__()
        self.hd = d // heads
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = (p(x).view(b, s, -1, self.hd).transpose(1, 2) for p in (self.q, self.k, self.v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, s, -1))


class Block(torch.nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.norm1, self.attn = torch.nn.LayerNorm(d), Attention(d)
        self.norm2, self.mlp = torch.nn.LayerNorm(d), MLP(d)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def grads_close(name, model, ref, tol):
    for (n, p), (_, q) in zip(model.named_parameters(), ref.named_parameters(), strict=True):
        close(f"{name} grad {n}", p.grad, q.grad, tol)


# MLP: ColwiseParallel fc1, RowwiseParallel fc2.
torch.manual_seed(1)
ref = MLP()
x = torch.randn(4, 16)
mlp = parallelize_module(
    copy.deepcopy(ref).to(dev), mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
)
out = mlp(x.to(dev))
want = ref(x)
close("mlp forward", out, want)
out.sum().backward()
want.sum().backward()
grads_close("mlp", mlp, ref, 1e-5)

# Attention block with sequence parallelism on the norms (activations sharded on the sequence).
torch.manual_seed(2)
ref = Block()
x = torch.randn(2, 8, 16)
plan = {
    "norm1": SequenceParallel(),
    "attn": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
    "attn.q": ColwiseParallel(),
    "attn.k": ColwiseParallel(),
    "attn.v": ColwiseParallel(),
    "attn.o": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
    "norm2": SequenceParallel(),
    "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
    "mlp.fc1": ColwiseParallel(),
    "mlp.fc2": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
}
block = parallelize_module(copy.deepcopy(ref).to(dev), mesh, plan)
xs = DTensor.from_local(x.to(dev).chunk(world, dim=1)[rank], mesh, [Shard(1)])
out = block(xs)
want = ref(x)
close("attention block forward", out, want, 1e-5)
out.full_tensor().square().sum().backward()
want.square().sum().backward()
grads_close("attention block", block, ref, 1e-4)

# FSDP2 over dp and TP over tp on a 2 x 2 mesh, trained 3 steps with AdamW against CPU.
torch.manual_seed(3)
ref = torch.nn.Sequential(Block(), Block())
model = copy.deepcopy(ref)
for blk in model:
    parallelize_module(
        blk,
        mesh2["tp"],
        {
            "attn.q": ColwiseParallel(),
            "attn.k": ColwiseParallel(),
            "attn.v": ColwiseParallel(),
            "attn.o": RowwiseParallel(),
            "mlp.fc1": ColwiseParallel(),
            "mlp.fc2": RowwiseParallel(),
        },
    )
    fully_shard(blk, mesh=mesh2["dp"])
fully_shard(model, mesh=mesh2["dp"])
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2)
g = torch.Generator().manual_seed(5)
dp_rank = mesh2["dp"].get_local_rank()
for step in range(3):
    x = torch.randn(4, 8, 16, generator=g)
    loss = model(x.chunk(2)[dp_rank].to(dev)).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    ref_loss = ref(x).square().mean()
    ref_loss.backward()
    ref_opt.step()
    ref_opt.zero_grad()
    loss = loss.detach().clone()
    dist.all_reduce(loss, op=dist.ReduceOp.AVG)
    close(f"fsdp+tp loss step {step}", loss, ref_loss, 1e-4)
diffs = torch.cat(
    [
        (p.full_tensor().cpu() - q.detach()).abs().flatten()
        for p, q in zip(model.parameters(), ref.parameters(), strict=True)
    ]
)
assert diffs.max() <= 5e-3 and diffs.mean() <= 1e-5, (diffs.max(), diffs.mean())

# DTensor random ops draw from the neuron device's generator: replicated values agree on every
# rank, shards of a sharded tensor differ.
torch.manual_seed(9)
r = torch.distributed.tensor.randn(8, 8, device_mesh=mesh, placements=[Replicate()])
every = [torch.empty(8, 8, device=dev) for _ in range(world)]
dist.all_gather(every, r.to_local())
assert all(torch.equal(e.cpu(), every[0].cpu()) for e in every), "replicated randn differs"
s = torch.distributed.tensor.randn(8, 8, device_mesh=mesh, placements=[Shard(0)])
shards = [torch.empty(2, 8, device=dev) for _ in range(world)]
dist.all_gather(shards, s.to_local())
assert len({tuple(t.cpu().flatten().tolist()) for t in shards}) == world, "shards repeat"
drop = torch.nn.functional.dropout(
    distribute_tensor(torch.ones(8, 8, device=dev), mesh, [Shard(0)]), 0.5
)
assert set(drop.full_tensor().unique().cpu().tolist()) <= {0.0, 2.0}
checks += 3

# A user-passed generator drives DTensor random ops as on CUDA, here on a 2-rank mesh (the 2 x 2
# mesh's tp groups): each shard draws the generator's Philox stream at DTensor's offset for it
# (shard index x local numel, rounded up to 4), the generator ends at offset + numel and the
# device's default generator is untouched.
tp2 = mesh2["tp"]
tp_rank = tp2.get_local_rank()
g = torch.Generator(device=dev)
g.manual_seed(1234)
default_state = torch.neuron.get_rng_state()
w = distribute_tensor(torch.empty(6, 5, device=dev), tp2, [Shard(0)])
torch.nn.init.normal_(w, generator=g)
assert g.get_offset() == 32 and g.initial_seed() == 1234, g.get_offset()
assert torch.equal(torch.neuron.get_rng_state(), default_state), "default generator moved"


def philox_draw(shape, offset, draw):
    h = torch.Generator(device=dev)
    raw = (1234).to_bytes(8, "little") + offset.to_bytes(8, "little")
    h.set_state(torch.frombuffer(bytearray(raw), dtype=torch.uint8))
    return draw(torch.empty(shape, device=dev), h).cpu()


local = w.to_local().cpu()
want = philox_draw((3, 5), (tp_rank * 15 + 3) // 4 * 4, lambda t, h: t.normal_(generator=h))
assert torch.equal(local, want), f"rank {rank}: normal_ shard off the generator's stream"
u = distribute_tensor(torch.empty(4, 4, device=dev), tp2, [Replicate()])
u.uniform_(generator=g)
want = philox_draw((4, 4), 32, lambda t, h: t.uniform_(generator=h))
assert torch.equal(u.to_local().cpu(), want) and g.get_offset() == 48
g.manual_seed(1234)
again = distribute_tensor(torch.empty(6, 5, device=dev), tp2, [Shard(0)])
torch.nn.init.normal_(again, generator=g)
assert torch.equal(again.to_local().cpu(), local), "a reseeded generator draws differently"
checks += 3
say(
    f"rank {rank}: tp ok ({checks} checks; fsdp+tp param diff max {diffs.max():.1e} "
    f"mean {diffs.mean():.1e})"
)
leave()
