"""Compute-bound work: large bf16 matmuls (hundreds of flops per byte of HBM).

The left operand is stored K-major (``a.t()`` is a view of a contiguous tensor), the layout in
which the matmul kernel streams tiles straight into TensorE; a row-major left operand costs
on-chip transposes on TensorE (2048^3 on trn1: 215 us K-major, 249 us row-major).
"""

import sys

import torch

n = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
# Uninitialised inputs: filling them would be memory-bound work that this script is not about
# (the values do not change the simulated time).
a = torch.empty(n, n, dtype=torch.bfloat16, device="neuron")
b = torch.empty(n, n, dtype=torch.bfloat16, device="neuron")
for _ in range(3):
    c = a.t() @ b
torch.neuron.synchronize()
