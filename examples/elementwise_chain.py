"""A bandwidth-bound script: a chain of elementwise ops over a 64 MiB fp32 tensor, each reading
and writing HBM at a few flops per byte (docs/report.md: its sensitivity ranks HBM first)."""

import sys

import torch

n = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
x = torch.full((n, n), 0.5, device="neuron")
for _ in range(3):
    x = torch.sigmoid(x * 1.5 + 0.25)
print(f"x[0, :2] = {x[0, :2].cpu().tolist()}")
