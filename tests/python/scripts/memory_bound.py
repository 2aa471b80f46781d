"""Memory-bound work: large fp32 elementwise ops and copies (a few flops per byte of HBM)."""

import sys

import torch

n = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
x = torch.ones(n, n, device="neuron")
y = torch.full((n, n), 2.0, device="neuron")
for _ in range(2):
    z = x + y
    w = z * 0.5
    x.copy_(w)
torch.neuron.synchronize()
