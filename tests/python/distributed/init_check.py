"""The ways a program picks the neuron backend (run under torchrun by
tests/python/test_distributed.py, also as two single-rank "nodes" on loopback): no backend with
neuron as the accelerator (then set_device(LOCAL_RANK), the CUDA idiom), "neuron",
"cpu:gloo,neuron:neuron", and init_device_mesh("neuron").
Prints "rank R on instance I core C: init ok (...)" per rank."""

import os

import neuronsim
import torch
import torch.distributed as dist
from neuronsim.distributed import this_rank
from say import leave, say
from torch.distributed.device_mesh import init_device_mesh


def neuron_backend_in_use():
    backend = dist.group.WORLD._get_backend(torch.device("neuron"))
    assert type(backend).__name__ == "_NeuronBackend", type(backend)


def all_reduce_ok(device="neuron"):
    x = torch.full((5,), float(dist.get_rank() + 1), device=device)
    dist.all_reduce(x)
    n = dist.get_world_size()
    assert x.cpu().tolist() == [n * (n + 1) / 2] * 5, x


dist.init_process_group()  # the accelerator is neuron: c10d picks the neuron backend
neuron_backend_in_use()
all_reduce_ok()
# The CUDA idiom after init_process_group (torchtitan, most torchrun scripts): the rank's core is
# neuron:<LOCAL_RANK>, the device torch.device("neuron") named above.
local_rank = int(os.environ["LOCAL_RANK"])
torch.neuron.set_device(local_rank)
all_reduce_ok(torch.device("neuron", local_rank))
dist.destroy_process_group()

dist.init_process_group("cpu:gloo,neuron:neuron")
neuron_backend_in_use()
all_reduce_ok()
all_reduce_ok("cpu")
dist.destroy_process_group()

mesh = init_device_mesh("neuron", (int(os.environ["WORLD_SIZE"]),))
assert mesh.device_type == "neuron"
neuron_backend_in_use()
all_reduce_ok()
place = this_rank()
busy = next(iter(neuronsim._C._collective_totals().values()))["busy_ns"]
say(
    f"rank {dist.get_rank()} on instance {place.instance} core {place.core}: init ok "
    f"(neuron:{place.device}, {torch.neuron.device_count()} visible, collectives "
    f"{busy / 1e3:.1f} us)"
)
leave()
