"""A tiny Llama trained with FSDP2 through Hugging Face accelerate on the neuron backend,
against a single-process CPU run (run under torchrun or `accelerate launch` by
tests/python/test_distributed.py). `import torch_neuronx` is what a Trainium script starts with;
with neuronsim it registers the simulated device, and accelerate then picks the neuron backend
by itself. Prints "rank R: accelerate ok ..."."""

import copy

import torch
import torch_neuronx  # neuronsim's stand-in: the simulated neuron device
from accelerate import Accelerator
from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin
from say import leave, say
from transformers import LlamaConfig, LlamaForCausalLM

STEPS, BATCH, SEQ = 3, 4, 16
config = LlamaConfig(
    vocab_size=128,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)


def batches():
    g = torch.Generator().manual_seed(3)
    return [torch.randint(0, config.vocab_size, (BATCH, SEQ), generator=g) for _ in range(STEPS)]


def train(model, optimizer, backward, rank, world, device):
    losses = []
    for ids in batches():
        ids = ids.chunk(world)[rank].to(device)
        loss = model(input_ids=ids, labels=ids).loss
        backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.detach())
    return losses


torch.manual_seed(0)
reference = LlamaForCausalLM(config)
cpu = copy.deepcopy(reference)
cpu_opt = torch.optim.AdamW(cpu.parameters(), lr=1e-2)
cpu_losses = [x.item() for x in train(cpu, cpu_opt, lambda loss: loss.backward(), 0, 1, "cpu")]

plugin = FullyShardedDataParallelPlugin(
    fsdp_version=2,
    auto_wrap_policy="transformer_based_wrap",
    transformer_cls_names_to_wrap=["LlamaDecoderLayer"],
    reshard_after_forward=True,
)
accelerator = Accelerator(fsdp_plugin=plugin)
import torch.distributed as dist  # noqa: E402

assert accelerator.distributed_type == DistributedType.FSDP, accelerator.distributed_type
assert accelerator.device.type == "neuron", accelerator.device
backend = dist.group.WORLD._get_backend(torch.device("neuron"))
assert type(backend).__name__ == "_NeuronBackend", type(backend)
rank, world = accelerator.process_index, accelerator.num_processes
model = copy.deepcopy(reference)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
model, optimizer = accelerator.prepare(model, optimizer)
torch_neuronx.clear_op_tracking()
losses = train(model, optimizer, accelerator.backward, rank, world, accelerator.device)
losses = [accelerator.reduce(x.clone(), reduction="mean").item() for x in losses]
for got, want in zip(losses, cpu_losses, strict=True):
    assert abs(got - want) <= 1e-4 * max(1.0, abs(want)), (losses, cpu_losses)
cpu_params = dict(cpu.named_parameters())
diffs = torch.cat(
    [
        (p.full_tensor().cpu() - cpu_params[n].detach()).abs().flatten()
        for n, p in model.named_parameters()
    ]
)
assert diffs.max() <= 5e-3 and diffs.mean() <= 1e-5, (diffs.max(), diffs.mean())
# It ran on the device: its matmuls were native, nothing took the CPU fallback.
executed, fallbacks = torch_neuronx.get_executed_ops(), torch_neuronx.get_fallback_ops()
assert "aten::mm" in executed and fallbacks == [], fallbacks
say(
    f"rank {rank}: accelerate ok ({accelerator.distributed_type}, backend neuron, "
    f"{accelerator.device}): losses {[round(x, 4) for x in losses]} (cpu "
    f"{[round(x, 4) for x in cpu_losses]}), param diff max {diffs.max():.1e} mean "
    f"{diffs.mean():.1e}"
)
accelerator.end_training()
leave()
