"""A small MLP (64 -> 128 -> 128 -> 10, batch 64) trained for a few AdamW steps on the neuron
device: the walkthrough of docs/report.md (where the time goes, and which hardware parameter
would help). Its kernels are shorter than a kernel launch, so the device often waits for the
host."""

import sys

import torch
from torch import nn

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 4
torch.manual_seed(0)
model = nn.Sequential(
    nn.Linear(64, 128),
    nn.ReLU(),
    nn.Linear(128, 128),
    nn.ReLU(),
    nn.Linear(128, 10),
).to("neuron")
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(64, 64).to("neuron")
y = torch.randint(0, 10, (64,)).to("neuron")
for _ in range(steps):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
print(f"loss {loss.item():.4f}")
