"""A small model's training steps on the neuron device (MLP with layer norm, AdamW)."""

import sys

import torch
from torch import nn

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 2
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 256), nn.GELU(), nn.LayerNorm(256), nn.Linear(256, 10)).to(
    "neuron"
)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(64, 128).to("neuron")
y = torch.randint(0, 10, (64,)).to("neuron")
for _ in range(steps):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
print(f"loss {loss.item():.4f}")
