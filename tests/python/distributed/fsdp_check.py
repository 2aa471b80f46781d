"""FSDP2 (fully_shard) on the neuron backend against a single-process CPU run (run under torchrun
by tests/python/test_distributed.py): a 2-layer transformer trained with AdamW for 3 steps, in
float32 and with a bfloat16 MixedPrecisionPolicy; losses and final parameters must match the CPU
run. Then meta-device initialisation on the neuron device's generator. Prints
"rank R: fsdp ok ..." per rank."""

import copy

import neuronsim
import torch
import torch.distributed as dist
from say import leave, say
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.nn.parallel import DistributedDataParallel

VOCAB, D, STEPS, BATCH, SEQ = 64, 32, 3, 8, 16


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, D)
        self.layers = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(D, 4, 64, dropout=0.0, batch_first=True)
            for _ in range(2)
        )
        self.head = torch.nn.Linear(D, VOCAB)

    def forward(self, ids):
        h = self.embed(ids)
        for layer in self.layers:
            h = layer(h)
        return self.head(h)


def batches():
    g = torch.Generator().manual_seed(7)
    return [torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g) for _ in range(STEPS)]


def train(model, data, rank, world, device):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for ids in data:
        ids = ids.chunk(world)[rank].to(device)
        logits = model(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, VOCAB).float(), ids[:, 1:].reshape(-1)
        )
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
    return losses


dist.init_process_group("neuron")
rank, world = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("neuron", (world,))
torch.manual_seed(0)
reference = Tiny()
cpu_model = copy.deepcopy(reference)
cpu_losses = [loss.item() for loss in train(cpu_model, batches(), 0, 1, "cpu")]
cpu_params = {n: p.detach() for n, p in cpu_model.named_parameters()}

# AdamW's first steps move each weight by about lr * sign(grad): a gradient near zero whose sign
# differs by rounding moves it the other way, so the bound on single weights is loose and the
# mean difference is the tight check.
CASES = [
    ("float32", None, 2e-4, 5e-3, 1e-5),
    (
        "bfloat16",
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32),
        5e-3,
        5e-2,
        2e-3,
    ),
]
for name, policy, tol, max_diff, mean_diff in CASES:
    model = copy.deepcopy(reference)
    kw = {"mesh": mesh} | ({"mp_policy": policy} if policy else {})
    for layer in model.layers:
        fully_shard(layer, **kw)
    fully_shard(model, **kw)
    assert all(p.device.type == "neuron" for p in model.parameters())
    losses = train(model, batches(), rank, world, "neuron")
    global_losses = []
    for loss in losses:  # the mean over ranks is the full batch's loss
        loss = loss.clone()
        dist.all_reduce(loss, op=dist.ReduceOp.AVG)
        global_losses.append(loss.item())
    for got, want in zip(global_losses, cpu_losses, strict=True):
        assert abs(got - want) <= tol * max(1.0, abs(want)), (name, global_losses, cpu_losses)
    diffs = torch.cat(
        [
            (p.full_tensor().cpu().float() - cpu_params[n]).abs().flatten()
            for n, p in model.named_parameters()
        ]
    )
    assert diffs.max() <= max_diff and diffs.mean() <= mean_diff, (name, diffs.max(), diffs.mean())
    say(
        f"rank {rank}: fsdp {name} ok: losses {[round(x, 4) for x in global_losses]} "
        f"(cpu {[round(x, 4) for x in cpu_losses]}), param diff max {diffs.max():.1e} "
        f"mean {diffs.mean():.1e}"
    )

# DistributedDataParallel: its comm hook waits on the all-reduce's future, not on the Work.
ddp = DistributedDataParallel(copy.deepcopy(reference).to("neuron"))
train(ddp, batches(), rank, world, "neuron")
ddp_diffs = torch.cat(
    [(p.cpu() - cpu_params[n]).abs().flatten() for n, p in ddp.module.named_parameters()]
)
assert ddp_diffs.max() <= 5e-3 and ddp_diffs.mean() <= 1e-5, (ddp_diffs.max(), ddp_diffs.mean())
# DDP's logger times iterations with the neuron timer (simulated device time between events on
# the current stream); without one it warns that only CPU and CUDA are timed and reports none.
timing = ddp._get_ddp_logging_data()
assert timing.get("avg_forward_compute_time", 0) > 0, timing
assert timing.get("avg_backward_compute_time", 0) > 0, timing
say(
    f"rank {rank}: ddp ok, param diff max {ddp_diffs.max():.1e} mean {ddp_diffs.mean():.1e}, "
    f"simulated forward {timing['avg_forward_compute_time'] / 1e3:.1f} us"
)

# Parameters created on the meta device and initialised on the neuron device's generator.
torch.neuron.manual_seed(123)
with torch.device("meta"):
    meta = Tiny()
for layer in meta.layers:
    fully_shard(layer, mesh=mesh)
fully_shard(meta, mesh=mesh)
meta.to_empty(device="neuron")
for m in meta.modules():
    if hasattr(m, "reset_parameters"):
        m.reset_parameters()
shards = [p.to_local() for p in meta.parameters()]
assert all(s.device.type == "neuron" and torch.isfinite(s).all() for s in shards)
loss = train(meta, batches()[:1], rank, world, "neuron")[0]
assert torch.isfinite(loss).item(), loss
say(
    f"rank {rank}: fsdp meta init ok, simulated {neuronsim.simulated_time_ns() / 1e6:.3f} ms, "
    f"collectives {neuronsim._C._collective_totals()}"
)
leave()
