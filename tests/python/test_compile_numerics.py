"""Compiled equals eager: models run through the neuron graph compiler give eager's results.

Fast mode computes a compiled graph's values on the host (ATen on the device tensors, like eager
mode, after decomposition to core ATen), so fp32 agrees to rounding of the decomposed ops
(rtol 1e-5). ISA mode computes them with the fused programs' data path: fp32 arithmetic on the
engines in fused order (intermediates stay fp32 in SBUF where eager rounds each op's result to
the tensor dtype), so fp32 agrees to 1e-4 and bf16 to bf16 rounding (rtol 2e-2).
"""

from __future__ import annotations

import contextlib
import copy

import neuronsim
import pytest
import torch
import torch._dynamo
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

FAST_F32 = {"rtol": 1e-5, "atol": 1e-5}
ISA_F32 = {"rtol": 1e-4, "atol": 1e-4}
BF16 = {"rtol": 2e-2, "atol": 2e-2}


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@contextlib.contextmanager
def isa_mode(on: bool):
    before = neuronsim._C._isa_mode()
    neuronsim._C._set_isa_mode(on)
    try:
        yield
    finally:
        neuronsim._C._set_isa_mode(before)


class MLP(nn.Module):
    def __init__(self, d=64, h=256):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.ln = nn.LayerNorm(h)
        self.fc2 = nn.Linear(h, d)

    def forward(self, x):
        return self.fc2(self.ln(F.gelu(self.fc1(x)))) + x


class Block(nn.Module):
    """A pre-norm transformer block with its embedding and head (causal attention)."""

    def __init__(self, vocab=64, d=64, heads=4):
        super().__init__()
        self.heads = heads
        self.emb = nn.Embedding(vocab, d)
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        b, t = ids.shape
        x = self.emb(ids)
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, -1))
        x = x + self.mlp(self.ln2(x))
        return self.head(x)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.c1(x))), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.fc(x.flatten(1))


def _pair(model: nn.Module, dtype=torch.float32):
    torch.manual_seed(0)
    eager = model.to(dtype).to("neuron")
    return eager, copy.deepcopy(eager)


@pytest.mark.parametrize("isa", [False, True], ids=["fast", "isa"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_mlp_forward(isa, dtype):
    eager, comp = _pair(MLP(), dtype)
    x = torch.randn(48, 64).to(dtype).to("neuron")
    compiled = torch.compile(comp, backend="neuron")
    with torch.no_grad(), isa_mode(isa):
        want = eager(x)
        got = compiled(x)
    tol = BF16 if dtype == torch.bfloat16 else (ISA_F32 if isa else FAST_F32)
    assert got.dtype == dtype
    assert_close(got.cpu(), want.cpu(), **tol)
    report = neuronsim.compile_stats()["per_graph"][-1]
    assert report["regions"] >= 2 and report["launches"] == 1, report


@pytest.mark.parametrize("isa", [False, True], ids=["fast", "isa"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_transformer_block_forward(isa, dtype):
    eager, comp = _pair(Block(), dtype)
    ids = torch.randint(0, 64, (2, 16)).to("neuron")
    compiled = torch.compile(comp, backend="neuron")
    with torch.no_grad(), isa_mode(isa):
        want = eager(ids)
        got = compiled(ids)
    tol = BF16 if dtype == torch.bfloat16 else (ISA_F32 if isa else FAST_F32)
    assert_close(got.cpu(), want.cpu(), **tol)


@pytest.mark.parametrize("isa", [False, True], ids=["fast", "isa"])
def test_transformer_block_training_step(isa):
    """Forward, backward and an optimizer step, all compiled: same losses, gradients and
    parameters. (SGD with momentum: Adam divides by the gradient's magnitude, so rounding in
    gradients that are ~0 would become lr-sized parameter differences.)"""
    eager, comp = _pair(Block())
    ids = torch.randint(0, 64, (2, 16)).to("neuron")
    tgt = torch.randint(0, 64, (2, 16)).to("neuron")
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
    opt_c = torch.optim.SGD(comp.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
    compiled = torch.compile(comp, backend="neuron")

    @torch.compile(backend="neuron")
    def opt_step():
        opt_c.step()

    def step(model, opt, optimize):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(ids).flatten(0, 1), tgt.flatten())
        loss.backward()
        optimize()
        return loss

    tol = ISA_F32 if isa else FAST_F32
    first = len(neuronsim.compile_stats()["per_graph"])
    with isa_mode(isa):
        for _ in range(2):
            le = step(eager, opt_e, opt_e.step)
            lc = step(compiled, opt_c, opt_step)
            assert_close(lc.cpu(), le.cpu(), **tol)
    for (name, a), b in zip(eager.named_parameters(), comp.parameters(), strict=True):
        assert_close(b.grad.cpu(), a.grad.cpu(), **tol, msg=lambda m, n=name: f"{n}.grad: {m}")
        assert_close(b.detach().cpu(), a.detach().cpu(), **tol, msg=lambda m, n=name: f"{n}: {m}")
    kinds = {g["kind"] for g in neuronsim.compile_stats()["per_graph"][first:]}
    assert kinds == {"forward", "backward", "inference"}, kinds


@pytest.mark.parametrize("isa", [False, True], ids=["fast", "isa"])
def test_convnet_forward_backward(isa):
    """Convolutions and max pooling run on the host between launches (counted); batch norm,
    ReLU, the head and the backward's elementwise work are fused."""
    eager, comp = _pair(ConvNet())
    x = torch.randn(4, 3, 16, 16).to("neuron")
    y = torch.randint(0, 10, (4,)).to("neuron")
    compiled = torch.compile(comp, backend="neuron")
    tol = ISA_F32 if isa else FAST_F32
    with isa_mode(isa):
        le = F.cross_entropy(eager(x), y)
        lc = F.cross_entropy(compiled(x), y)
        le.backward()
        lc.backward()
    assert_close(lc.cpu(), le.cpu(), **tol)
    for (name, a), b in zip(eager.named_parameters(), comp.parameters(), strict=True):
        assert_close(b.grad.cpu(), a.grad.cpu(), **tol, msg=lambda m, n=name: f"{n}.grad: {m}")
    fw = [g for g in neuronsim.compile_stats()["per_graph"] if g["kind"] == "forward"][-1]
    assert fw["host_nodes"].get("aten::convolution") == 2, fw
    assert fw["launches"] >= 2 and fw["regions"] >= 2, fw


def test_convnet_batchnorm_running_stats_match_cpu():
    """Compiled training forward updates BatchNorm's running statistics as on the CPU."""
    torch.manual_seed(0)
    cpu = ConvNet()
    comp = copy.deepcopy(cpu).to("neuron")
    x = torch.randn(4, 3, 16, 16)
    cpu(x)
    torch.compile(comp, backend="neuron")(x.to("neuron"))
    assert_close(comp.bn.running_mean.cpu(), cpu.bn.running_mean, **FAST_F32)
    assert_close(comp.bn.running_var.cpu(), cpu.bn.running_var, **FAST_F32)
    assert int(comp.bn.num_batches_tracked) == 1


def _tiny_llama():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    cpu = transformers.LlamaForCausalLM(config).eval()
    return cpu, copy.deepcopy(cpu).to("neuron")


def test_tiny_llama_static_cache_generate_gives_identical_tokens():
    cpu, dev = _tiny_llama()
    ids = torch.randint(3, 128, (2, 10), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    kw = {"max_new_tokens": 6, "do_sample": False, "min_new_tokens": 6}
    expected = cpu.generate(ids, attention_mask=mask, **kw)
    before = neuronsim.compile_stats()
    out = dev.generate(
        ids.to("neuron"), attention_mask=mask.to("neuron"), cache_implementation="static", **kw
    )
    after = neuronsim.compile_stats()
    assert torch.equal(out.cpu(), expected)
    # The decode step compiles once for the whole loop (static shapes, static cache).
    assert after["graphs"] - before["graphs"] == 1, (before["graphs"], after["graphs"])
    assert after["fused_regions"] > before["fused_regions"]


def test_tiny_llama_forward_in_isa_mode():
    """RMSNorm, rotary embeddings, grouped-query attention and SwiGLU computed by the fused
    programs match eager logits."""
    _, dev = _tiny_llama()
    ids = torch.randint(3, 128, (2, 10), generator=torch.Generator().manual_seed(1)).to("neuron")
    compiled = torch.compile(dev, backend="neuron")
    with torch.no_grad():
        want = dev(ids).logits
        with isa_mode(True):
            got = compiled(ids).logits
    assert_close(got.cpu(), want.cpu(), **ISA_F32)
