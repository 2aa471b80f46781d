"""A torch.compile'd step (plain ``torch.compile``, no backend argument): a memory-bound
elementwise chain and a small MLP forward, each one fused graph. Exits non-zero unless the
graphs compiled to fused regions with no eager node (so a run measures the fused programs)."""

import sys

import neuronsim
import torch
import torch.nn as nn
import torch.nn.functional as F

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1024


@torch.compile
def chain(x, y):
    return F.gelu(x * 0.5 + y).square() - y


mlp = torch.compile(nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256)))
mlp = mlp.to("neuron")
x = torch.randn(n, n, device="neuron")
y = torch.randn(n, n, device="neuron")
a = torch.randn(256, 256, device="neuron")
with torch.no_grad():
    for _ in range(4):
        z = chain(x, y)
        b = mlp(a)
torch.neuron.synchronize()
s = neuronsim.compile_stats()
print(f"graphs {s['graphs']} fused regions {s['fused_regions']} eager nodes {s['eager_nodes']}")
if s["graphs"] < 2 or s["fused_regions"] < 2 or s["eager_nodes"]:
    sys.exit(f"not compiled as expected: {s}")
