"""torch.compile against eager over a sampled grid of model blocks, one run: MLP, causal
attention and normalisation blocks at batch 1-1024 and widths 256-8192, fp32 and bf16, forward
(no_grad) and training step (forward and backward). Issue 24: compiled / eager simulated time
<= 1.0 at every point, the median well below. The whole grid would take hours of host time on
a small machine (an 8192-wide MLP alone is 2 GB of fp32 weights the host multiplies), so a
fixed sample spanning its corners is measured (SAMPLE, each point printed as it runs); the worst
point is printed with its compiled graphs' regions and the nodes the compiler did not fuse (with
their reasons). Exits 1 when a point is above 1.0.

    .venv/bin/python bench/compile_sweep.py [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys

import neuronsim
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        return self.ln(self.fc2(F.gelu(self.fc1(x))) + x)


class Attention(nn.Module):
    """Causal self-attention over sequences of 128 (heads of 64): batch counts sequences."""

    def __init__(self, d):
        super().__init__()
        self.heads = d // 64
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, 64).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.proj(a.transpose(1, 2).reshape(b, t, -1))


class Norm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        return F.gelu(self.ln(x)) + x


# (block, batch, width): corners and middles of the grid, skipping products the host cannot
# compute in reasonable time (an 8192-wide MLP is 2 GB of fp32 weights).
SAMPLE = [
    ("mlp", 1, 256),
    ("mlp", 64, 512),
    ("mlp", 256, 1024),
    ("mlp", 1024, 256),
    ("mlp", 16, 2048),
    ("attention", 1, 256),
    ("attention", 4, 512),
    ("attention", 8, 1024),
    ("norm", 1, 8192),
    ("norm", 1024, 1024),
    ("norm", 256, 4096),
]
BLOCKS = {"mlp": MLP, "attention": Attention, "norm": Norm}


def sim_us(fn) -> float:
    fn()
    fn()
    torch.neuron.synchronize()
    t0 = neuronsim.simulated_time_ns()
    fn()
    torch.neuron.synchronize()
    return (neuronsim.simulated_time_ns() - t0) / 1e3


def point(block: str, batch: int, width: int, dtype: torch.dtype, train: bool):
    torch.manual_seed(0)
    model = BLOCKS[block](width).to("neuron", dtype)
    shape = (batch, 128, width) if block == "attention" else (batch, width)
    x = torch.randn(shape).to("neuron", dtype)
    compiled = torch.compile(model)

    def step(run):
        def go():
            if train:
                model.zero_grad(set_to_none=True)
                run(x).float().square().mean().backward()
            else:
                with torch.no_grad():
                    run(x)

        return go

    eager = sim_us(step(model))
    before = len(neuronsim.compile_stats()["per_graph"])
    comp = sim_us(step(compiled))
    graphs = neuronsim.compile_stats()["per_graph"][before:]
    torch._dynamo.reset()
    return eager, comp, graphs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(
        f"{'block':<10}{'batch':>6}{'width':>7}{'dtype':>10}{'mode':>9}"
        f"{'eager us':>11}{'compiled us':>13}{'ratio':>7}"
    )
    rows = []
    for block, batch, width in SAMPLE:
        for dtype in (torch.float32, torch.bfloat16):
            for train in (False, True):
                e, c, graphs = point(block, batch, width, dtype, train)
                mode = "train" if train else "forward"
                name = str(dtype).replace("torch.", "")
                rows.append((c / e, block, batch, width, name, mode, graphs))
                print(
                    f"{block:<10}{batch:>6}{width:>7}{name:>10}{mode:>9}"
                    f"{e:>11.1f}{c:>13.1f}{c / e:>7.2f}",
                    flush=True,
                )
    ratios = [r[0] for r in rows]
    worst = max(rows, key=lambda r: r[0])
    print(
        f"\n{len(rows)} points: median compiled/eager {statistics.median(ratios):.2f}, "
        f"{sum(r > 1.0 for r in ratios)} above 1.0"
    )
    print(
        f"worst: {worst[1]} batch {worst[2]} width {worst[3]} {worst[4]} {worst[5]}: "
        f"{worst[0]:.2f}"
    )
    for g in worst[6]:
        print(f"  graph {g['name']}: regions {', '.join(g['region_names'])}")
        for reason, n in g["not_fused"].items():
            print(f"    not fused ({n}): {reason}")
    return 1 if worst[0] > 1.0 else 0


if __name__ == "__main__":
    sys.exit(main())
