"""nn.SyncBatchNorm on the neuron backend against BatchNorm2d on the whole batch on the CPU (run
under torchrun by tests/python/test_distributed.py). The ranks hold different numbers of images
(3 and 5), so the gathered counts matter; two training steps (running statistics updated twice),
then eval. Output, input gradient, summed parameter gradients and running statistics must match.
Prints "rank R: sync batch norm ok ..." per rank."""

import copy
import os

import neuronsim
import torch
import torch.distributed as dist
from say import say

dist.init_process_group("neuron")
rank, world = dist.get_rank(), dist.get_world_size()
assert world == 2, "run with --nproc-per-node 2"
device = torch.device("neuron", torch.neuron.current_device())

torch.manual_seed(0)
ref = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3, padding=1), torch.nn.BatchNorm2d(6))
dev = torch.nn.SyncBatchNorm.convert_sync_batchnorm(copy.deepcopy(ref)).to(device)
assert isinstance(dev[1], torch.nn.SyncBatchNorm)
splits = [3, 5]
lo, hi = sum(splits[:rank]), sum(splits[: rank + 1])
checks = 0


def close(name, got, want, tol=1e-4):
    global checks
    got = got.detach().cpu()
    assert torch.allclose(
        got, want, rtol=tol, atol=tol
    ), f"rank {rank}: {name}: max abs diff {(got - want).abs().max().item():.3g}"
    checks += 1


for step in range(2):
    x = torch.randn(8, 3, 7, 7, generator=torch.Generator().manual_seed(step))
    w = torch.randn(8, 6, 7, 7, generator=torch.Generator().manual_seed(10 + step))
    xc = x.clone().requires_grad_()
    ref.zero_grad()
    yc = ref(xc)
    (yc * w).sum().backward()
    xd = x[lo:hi].to(device).requires_grad_()
    dev.zero_grad()
    yd = dev(xd)
    (yd * w[lo:hi].to(device)).sum().backward()
    close(f"step {step} output", yd, yc[lo:hi])
    close(f"step {step} input grad", xd.grad, xc.grad[lo:hi])
    for (name, pc), pd in zip(ref.named_parameters(), dev.parameters(), strict=True):
        g = pd.grad.clone()
        dist.all_reduce(g)  # the ranks' parts of the whole batch's gradient
        close(f"step {step} {name} grad", g, pc.grad)
    close(f"step {step} running_mean", dev[1].running_mean, ref[1].running_mean)
    close(f"step {step} running_var", dev[1].running_var, ref[1].running_var)
assert int(dev[1].num_batches_tracked) == 2

ref.eval()
dev.eval()
x = torch.randn(4, 3, 7, 7)
with torch.no_grad():
    close("eval output", dev(x.to(device)), ref(x))
fallbacks = neuronsim.get_fallback_ops()
assert not fallbacks, f"rank {rank}: CPU fallbacks {fallbacks}"
dist.barrier()
say(f"rank {rank}: sync batch norm ok ({checks} checks)")
dist.destroy_process_group()
# Leave without finalizing the interpreter (collectives_check.py says why).
os._exit(0)
