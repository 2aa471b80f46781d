"""A small MLP trained for a few AdamW steps on the neuron device: the walkthrough of
docs/report.md (where the time goes, and which hardware parameter would help)."""

import sys

import torch
from torch import nn

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 4
torch.manual_seed(0)
model = nn.Sequential(
    nn.Linear(256, 512),
    nn.ReLU(),
    nn.Linear(512, 512),
    nn.ReLU(),
    nn.Linear(512, 10),
).to("neuron")
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(128, 256).to("neuron")
y = torch.randint(0, 10, (128,)).to("neuron")
for _ in range(steps):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
print(f"loss {loss.item():.4f}")
