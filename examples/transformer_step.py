"""Demo model for `tools/demo.sh`: a transformer encoder layer trains for a few steps on the
neuron device (bf16 autocast off, fp32 weights, AdamW), one `record_function` range per step."""

import sys

import neuronsim
import torch
from torch import nn

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
torch.manual_seed(0)
layer = nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, batch_first=True)
model = nn.Sequential(layer, nn.Linear(256, 1000)).to("neuron")
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(8, 128, 256).to("neuron")
y = torch.randint(0, 1000, (8, 128)).to("neuron")
for step in range(steps):
    with torch.profiler.record_function(f"train_step_{step}"):
        t0 = neuronsim.simulated_time_ns()
        opt.zero_grad()
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())
        loss.backward()
        opt.step()
        torch.neuron.synchronize()
        t1 = neuronsim.simulated_time_ns()
    print(f"step {step}: loss {loss.item():.4f}, simulated {(t1 - t0) / 1e3:.1f} us")
fallback = sorted(neuronsim.get_fallback_ops())
print(f"ops on the CPU fallback: {', '.join(fallback) if fallback else 'none'}")
