"""Hugging Face transformers on the neuron device: tiny models built from configs (nothing is
downloaded), compared with the same models on the CPU.

Tolerances: the device computes each ATen op with the CPU kernel, but attention dispatches
differently (the CPU picks the fused flash-attention kernel, the device the math decomposition),
so float32 logits agree to ~1e-7, not bitwise: rtol=1e-5/atol=1e-5. Training comparisons run the
CPU reference on the math attention path (sdpa_kernel(MATH)) so both sides do the same
arithmetic; Adam would otherwise amplify rounding in near-zero gradients into lr-sized updates.
Greedy decoding must produce identical tokens.
"""

from __future__ import annotations

import copy

import neuronsim
import pytest
import torch
import torch._dynamo
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.testing import assert_close

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # device_map= needs it

from transformers import (  # noqa: E402
    AutoModelForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

VOCAB = 128
LOGITS_TOL = {"rtol": 1e-5, "atol": 1e-5}
F32 = {"rtol": 1e-5, "atol": 1e-6}
# Ops that generate() runs outside the model (attention-mask and stopping-criteria helpers) and
# the device does not implement natively yet.
GENERATE_FALLBACKS = {"aten::cumsum", "aten::isin.Tensor_Tensor", "aten::isin.Tensor_Tensor_out"}


def _config(arch: str, **overrides):
    cfg, cls = _base_config(arch)
    for k, v in overrides.items():
        setattr(cfg, k, v)
    return cfg, cls


def _base_config(arch: str):
    if arch == "llama":
        return LlamaConfig(
            vocab_size=VOCAB,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=0,
        ), LlamaForCausalLM
    if arch == "gpt2":
        return GPT2Config(
            vocab_size=VOCAB,
            n_embd=64,
            n_layer=2,
            n_head=4,
            n_positions=64,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            bos_token_id=1,
            eos_token_id=2,  # no pad token, as GPT-2 itself
        ), GPT2LMHeadModel
    if arch == "qwen2":
        return Qwen2Config(
            vocab_size=VOCAB,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=0,
        ), Qwen2ForCausalLM
    raise ValueError(arch)


def _build(arch: str, seed: int = 0, **overrides):
    cfg, cls = _config(arch, **overrides)
    torch.manual_seed(seed)
    cpu = cls(cfg).eval()
    return cpu, copy.deepcopy(cpu).to("neuron")


def _ids(batch=2, length=10, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, VOCAB, (batch, length), generator=g)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("arch", ["llama", "gpt2", "qwen2"])
def test_forward_logits_match_cpu(arch):
    cpu, dev = _build(arch)
    ids = _ids()
    mask = torch.ones_like(ids)
    assert all(p.device.type == "neuron" for p in dev.parameters())
    assert all(b.device.type == "neuron" for b in dev.buffers())
    with torch.no_grad():
        expected = cpu(ids, attention_mask=mask).logits
        neuronsim.clear_op_tracking()
        out = dev(ids.to("neuron"), attention_mask=mask.to("neuron")).logits
    assert out.device.type == "neuron" and out.shape == (2, 10, VOCAB)
    assert neuronsim.get_fallback_ops() == set()
    assert {"aten::mm", "aten::_softmax"} & neuronsim.get_executed_ops()
    assert_close(out.cpu(), expected, **LOGITS_TOL)


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_forward_without_attention_mask_with_pad_token(arch):
    """With config.pad_token_id set and no attention mask, models like GPT-2 check the first
    and last tokens for padding (``input_ids[:, [-1, 0]]``: advanced indexing after a slice)."""
    cpu, dev = _build(arch, pad_token_id=0)
    ids = _ids()
    with torch.no_grad():
        expected = cpu(ids).logits
        out = dev(ids.to("neuron")).logits
    assert_close(out.cpu(), expected, **LOGITS_TOL)


def test_module_to_keeps_tied_weights():
    """GPT-2 ties lm_head.weight to the token embedding; moving the model must keep one shared
    Parameter (as .to("cuda") does), or training silently updates two copies."""
    cpu, dev = _build("gpt2")
    assert cpu.lm_head.weight is cpu.transformer.wte.weight
    assert (
        dev.lm_head.weight is dev.transformer.wte.weight
    ), "after .to('neuron') lm_head.weight and transformer.wte.weight are separate Parameters"


def test_llama_padded_batch_logits_match_cpu():
    """Left padding with an attention mask: the masked positions are excluded the same way."""
    cpu, dev = _build("llama")
    ids = _ids(length=9)
    ids[0, :3] = 0
    mask = torch.ones_like(ids)
    mask[0, :3] = 0
    with torch.no_grad():
        expected = cpu(ids, attention_mask=mask).logits
        out = dev(ids.to("neuron"), attention_mask=mask.to("neuron")).logits.cpu()
    assert_close(out[0, 3:], expected[0, 3:], **LOGITS_TOL)
    assert_close(out[1], expected[1], **LOGITS_TOL)


@pytest.mark.parametrize("arch", ["llama", "gpt2", "qwen2"])
def test_greedy_generate_dynamic_cache_matches_cpu(arch):
    cpu, dev = _build(arch)
    ids = _ids()
    mask = torch.ones_like(ids)
    kw = {"max_new_tokens": 8, "do_sample": False, "min_new_tokens": 8}
    expected = cpu.generate(ids, attention_mask=mask, **kw)
    before = neuronsim.compile_stats()
    neuronsim.clear_op_tracking()
    out = dev.generate(ids.to("neuron"), attention_mask=mask.to("neuron"), **kw)
    assert out.device.type == "neuron"
    assert out.shape == (2, 18)
    assert torch.equal(out.cpu(), expected)
    # The dynamic cache is not compiled.
    assert neuronsim.compile_stats()["graphs"] == before["graphs"]
    assert neuronsim.get_fallback_ops() <= GENERATE_FALLBACKS, neuronsim.get_fallback_ops()


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_static_cache_generate_autocompiles_with_neuron_backend(arch):
    cpu, dev = _build(arch)
    ids = _ids()
    mask = torch.ones_like(ids)
    kw = {"max_new_tokens": 6, "do_sample": False, "min_new_tokens": 6}
    expected = cpu.generate(ids, attention_mask=mask, **kw)
    before = neuronsim.compile_stats()
    out = dev.generate(
        ids.to("neuron"), attention_mask=mask.to("neuron"), cache_implementation="static", **kw
    )
    after = neuronsim.compile_stats()
    # transformers compiles the decoding step with backend=self.device.type == "neuron".
    assert dev._last_compile_config.backend == "neuron"
    assert after["graphs"] > before["graphs"], (before, after)
    assert after["nodes"] > before["nodes"]
    assert torch.equal(out.cpu(), expected)


def test_from_pretrained_device_map_neuron(tmp_path):
    cpu, _ = _build("llama")
    cpu.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, device_map="neuron")
    assert isinstance(loaded, LlamaForCausalLM)
    params = dict(loaded.named_parameters())
    assert params and all(p.device == torch.device("neuron", 0) for p in params.values())
    assert all(b.device.type == "neuron" for b in loaded.buffers())
    for name, p in cpu.named_parameters():
        assert torch.equal(params[name].detach().cpu(), p.detach()), name
    ids = _ids()
    with torch.no_grad():
        assert_close(loaded(ids.to("neuron")).logits.cpu(), cpu(ids).logits, **LOGITS_TOL)


def test_from_pretrained_device_map_neuron_ties_weights(tmp_path):
    cpu, _ = _build("gpt2")
    cpu.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, device_map="neuron")
    assert loaded.lm_head.weight is loaded.transformer.wte.weight
    assert loaded.lm_head.weight.device.type == "neuron"
    ids = _ids()
    mask = torch.ones_like(ids)
    with torch.no_grad():
        out = loaded(ids.to("neuron"), attention_mask=mask.to("neuron")).logits
        assert_close(out.cpu(), cpu(ids, attention_mask=mask).logits, **LOGITS_TOL)


def test_from_pretrained_bf16_on_neuron(tmp_path):
    cpu, _ = _build("qwen2")
    cpu.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(
        tmp_path, device_map="neuron", dtype=torch.bfloat16
    )
    ref = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.bfloat16)
    assert all(p.dtype == torch.bfloat16 and p.device.type == "neuron" for p in loaded.parameters())
    ids = _ids()
    with torch.no_grad():
        out = loaded(ids.to("neuron")).logits
        with sdpa_kernel(SDPBackend.MATH):
            expected = ref(ids).logits
    assert out.dtype == torch.bfloat16
    assert_close(out.cpu(), expected)  # bfloat16 defaults


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_training_step_matches_cpu(arch):
    cpu, dev = _build(arch)
    cpu.train()
    dev.train()
    opt_c = torch.optim.AdamW(cpu.parameters(), lr=1e-3)
    opt_d = torch.optim.AdamW(dev.parameters(), lr=1e-3)
    ids = _ids(length=12)
    mask = torch.ones_like(ids)
    ids_d, mask_d = ids.to("neuron"), mask.to("neuron")
    for step in range(2):
        with sdpa_kernel(SDPBackend.MATH):
            loss_c = cpu(ids, attention_mask=mask, labels=ids).loss
        loss_c.backward()
        neuronsim.clear_op_tracking()
        loss_d = dev(ids_d, attention_mask=mask_d, labels=ids_d).loss
        loss_d.backward()
        assert neuronsim.get_fallback_ops() == set()
        assert_close(loss_d.item(), loss_c.item(), **F32)
        for (name, pc), pd in zip(cpu.named_parameters(), dev.parameters(), strict=True):
            assert pd.grad is not None and pd.grad.device.type == "neuron", name
            assert_close(
                pd.grad.cpu(), pc.grad, **F32, msg=lambda m, s=step, n=name: f"step {s} {n}: {m}"
            )
        opt_c.step()
        opt_d.step()
        opt_c.zero_grad()
        opt_d.zero_grad()
    for (name, pc), pd in zip(cpu.named_parameters(), dev.parameters(), strict=True):
        assert_close(pd.detach().cpu(), pc.detach(), **F32, msg=name)
