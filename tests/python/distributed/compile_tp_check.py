"""torch.compile(backend="neuron") of a tensor-parallel MLP (run with 2 ranks under torchrun by
tests/python/test_distributed.py): DTensor's functional collectives in the compiled forward and
backward graphs give eager's values and gradients, and each collective is an operation on the
rank's timeline between the graph's launches: it starts after the compute that produced its
input, and the compute that reads its result starts after it. Prints "rank R: compile tp ok"."""

import copy
import json
import sys
from pathlib import Path

import neuronsim
import neuronsim.tracing
import torch
import torch.distributed as dist
from say import leave, say
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

dist.init_process_group("neuron")
rank, world = dist.get_rank(), dist.get_world_size()
assert world == 2, "compile_tp_check runs on 2 ranks"
out_dir = Path(sys.argv[1])
mesh = init_device_mesh("neuron", (world,))


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(64, 256)
        self.down = torch.nn.Linear(256, 64)

    def forward(self, x):
        # The residual reads the all_reduce's result: the graph's compute goes on after it.
        return torch.tanh(self.down(torch.relu(self.up(x)))) + x


torch.manual_seed(0)
model = MLP()
plan = {"up": ColwiseParallel(), "down": RowwiseParallel()}
eager = parallelize_module(copy.deepcopy(model).to("neuron"), mesh, plan)
compiled_model = parallelize_module(copy.deepcopy(model).to("neuron"), mesh, plan)
compiled = torch.compile(compiled_model, backend="neuron")
x = torch.randn(32, 64)


def step(m):
    xd = x.to("neuron").requires_grad_()
    out = m(xd)
    out.square().mean().backward()
    return out, xd.grad


def close(name, got, want, tol=1e-5):
    got, want = got.detach().cpu().float(), want.detach().cpu().float()
    diff = (got - want).abs().max().item()
    assert diff <= tol * max(1.0, want.abs().max().item()), f"rank {rank} {name}: max diff {diff}"


want_out, want_dx = step(eager)
got_out, got_dx = step(compiled)  # compiles
for m in (eager, compiled_model):
    m.zero_grad()
want_out, want_dx = step(eager)
torch.neuron.synchronize()
trace = out_dir / f"compile_tp.rank{rank}.json"
before = neuronsim._C._collective_totals()
neuronsim.tracing.start(str(trace))
got_out, got_dx = step(compiled)
torch.neuron.synchronize()
neuronsim.tracing.stop()
after = neuronsim._C._collective_totals()

close("output", got_out, want_out)
close("input grad", got_dx, want_dx)
for (name, p), q in zip(compiled_model.named_parameters(), eager.parameters(), strict=True):
    close(f"grad {name}", p.grad.to_local(), q.grad.to_local())

# The graphs hold the collectives: the forward's all_reduce (RowwiseParallel's output) and the
# backward's (ColwiseParallel's input gradient), each ending a launch of its graph.
stats = neuronsim.compile_stats()
graphs = {g["kind"]: g for g in stats["per_graph"]}  # the latest graph of each kind
for kind in ("forward", "backward"):
    g = graphs[kind]
    assert g["collective_nodes"].get("_c10d_functional::all_reduce") == 1, g
    assert g["eager_nodes"] == {} and g["host_nodes"] == {}, g
assert graphs["forward"]["launches"] == 2, graphs["forward"]  # compute, all_reduce, compute
assert graphs["backward"]["launches"] == 3, graphs["backward"]  # dx, all_reduce, dW, wait, rest
counts = sum(t["count"] for t in after.values()) - sum(t["count"] for t in before.values())
assert counts == 2, f"rank {rank}: {counts} collectives in a compiled training step, want 2"

# The timeline: each collective starts after the launch of its graph that computed its input,
# and the launch after its wait (the forward's tanh and residual, the backward's last) starts
# after it ends. The compiler issues a collective as soon as its input exists and waits as late
# as it can (fx_graph.overlap_collectives): the backward's weight gradients, which do not need
# the input gradient's all-reduce, run while it runs; the forward has nothing to overlap.
events = json.loads(trace.read_text())
events = events["traceEvents"] if isinstance(events, dict) else events
rows = {
    (e["pid"], e["tid"]): e["args"]["name"]
    for e in events
    if e.get("ph") == "M" and e.get("name") == "thread_name"
}
slices = [e for e in events if e.get("ph") == "X"]


def on_row(word):
    return [e for e in slices if word in rows.get((e["pid"], e["tid"]), "")]


collectives = sorted(
    (e for e in on_row("Collectives") if e["name"] == "all_reduce"), key=lambda e: e["ts"]
)
launches = sorted(
    (
        e
        for e in on_row("Kernels")
        if e["name"][:2] in ("fw", "bw") and "." not in e["name"].split()[0]
    ),
    key=lambda e: e["ts"],
)
assert len(collectives) == 2, collectives
eps = 1e-3  # trace timestamps are microseconds with nanosecond decimals
during = {}
for c, kind in zip(collectives, ("fw", "bw"), strict=True):
    end = c["ts"] + c["dur"]
    mine = [k for k in launches if k["name"].startswith(kind)]
    before_c = [k for k in mine if k["ts"] <= c["ts"] + eps]
    after_c = [k for k in mine if k["ts"] > c["ts"] + eps]
    assert before_c and before_c[-1]["ts"] + before_c[-1]["dur"] <= c["ts"] + eps, (c, mine)
    assert after_c and after_c[-1]["ts"] + eps >= end, (c, mine)
    during[kind] = [k for k in mine if c["ts"] + eps < k["ts"] < end - eps]
assert not during["fw"], during
assert during["bw"], (collectives[1], launches)
say(
    f"rank {rank}: compile tp ok ({len(collectives)} collectives between launches, "
    f"{len(during['bw'])} backward launch overlapping its all_reduce)"
)
leave()
