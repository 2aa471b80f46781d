"""The Hugging Face mixture-of-experts architectures, tiny, forward and backward on the neuron
device against the CPU.

Which architectures: every model type of the installed transformers with a causal-LM class
(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) whose modeling module defines a routed-experts class (a class
name with "Experts", "SparseMoe", "MoE" or "Moe" in it). Nothing is hand-listed, so a new
transformers release brings its new MoE models into the sweep.

How tiny: the config class's defaults with every size-like field replaced from ``SMALL`` (2
layers, hidden 64, 4 heads, 4 experts with 2 per token, ...), nested config dicts (DBRX's
ffn_config), per-layer dicts and per-layer type lists included; ``EXTRA`` holds the few fields
one architecture needs beyond sizes (which layers have experts, fields whose defaults are None).
The model is first built on the meta device: it must contain an expert module and stay under
``MAX_PARAMS``. Dropout and router jitter are off, router logits (the auxiliary load-balancing
loss, histc on the expert indices) are on, and the models run in train mode.

The check: the same weights on both devices, one forward with labels and one backward; the loss
and every parameter gradient must match the CPU's (the CPU runs attention on the math path, as
the device does). An architecture whose tiny model cannot be built, or fails on the CPU too, is
reported as not run, not counted.

    .venv/bin/python tests/python/hf_moe_sweep.py [model_type ...]   # prints "N of M ... pass"
"""

from __future__ import annotations

import copy
import re
import sys
import time
import warnings

import neuronsim  # noqa: F401  (registers the neuron device)
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

VOCAB = 128
BATCH, LENGTH = 2, 12
LOSS_TOL = {"rtol": 1e-5, "atol": 1e-5}
GRAD_TOL = {"rtol": 1e-4, "atol": 1e-5}

# Size-like config fields and their tiny values.
SMALL = {
    "vocab_size": VOCAB,
    "hidden_size": 64,
    "d_model": 64,
    "intermediate_size": 64,
    "intermediate_size_mlp": 64,
    "ffn_hidden_size": 64,
    "moe_intermediate_size": 32,
    "expert_ffn_hidden_size": 32,
    "shared_expert_intermediate_size": 32,
    "shared_intermediate_size": 32,
    "moe_shared_expert_intermediate_size": 32,
    "num_hidden_layers": 2,
    "n_layers": 2,
    "num_layers": 2,
    "num_attention_heads": 4,
    "n_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "kv_channels": 16,
    "max_position_embeddings": 64,
    "max_seq_len": 64,
    "model_max_length": 64,
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "moe_num_experts": 4,
    "num_experts_per_tok": 2,
    "num_experts_per_token": 2,
    "moe_k": 2,
    "moe_topk": 2,
    "moe_top_k": 2,
    "n_group": 2,
    "num_expert_group": 2,
    "topk_group": 1,
    "kv_lora_rank": 16,
    "q_lora_rank": 32,
    "o_lora_rank": 16,
    "o_groups": 2,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "qk_head_dim": 16,
    "v_head_dim": 16,
    "index_topk": 8,
    "index_head_dim": 16,
    "index_n_heads": 2,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "linear_head_dim": 16,
    "linear_num_heads": 4,
    "mamba_d_state": 8,
    "mamba_n_heads": 4,
    "mamba_d_head": 32,
    "mamba_dt_rank": 8,
    "mamba_chunk_size": 8,
    "ssm_state_size": 8,
    "mamba_num_heads": 4,
    "mamba_head_dim": 16,
    "n_groups": 1,
    "chunk_size": 8,
    "zero_expert_num": 2,
    "router_hidden_size": 16,
    "gated_norm_rank": 4,
    "keep_window_size": 8,
    "block_size": 8,
    "sliding_window": 8,
    "num_nextn_predict_layers": 0,
    # Where the dense layers end and the expert layers start: layer 1 has experts.
    "first_k_dense_replace": 1,
    "num_dense_layers": 1,
    "moe_layer_start_index": 1,
    "moe_layer_end_index": 1,
    "moe_layer_interval": 1,
    "decoder_sparse_step": 1,
    "expert_layer_period": 1,
    "expert_layer_offset": 0,
}
# Per-architecture fields beyond sizes: which layers have experts, and fields whose defaults
# are None where the modeling code needs a value.
EXTRA = {
    "doge": {"is_moe": True},
    "flint": {"mlp_only_layers": [0]},
    "lfm2_moe": {"layer_types": ["conv", "full_attention"]},
    "laguna": {"num_attention_heads_per_layer": [4, 4]},
    "zaya": {"num_experts_per_tok": 1},
    "jamba": {"attn_layer_period": 2, "attn_layer_offset": 1},
    "qwen4_exp": {
        "indexer_n_heads": 2,
        "indexer_kv_heads": 1,
        "indexer_head_dim": 16,
        "indexer_budget": 8,
        "indexer_compress_ratio": 2,
    },
}
EXTRA["qwen4_exp_text"] = EXTRA["qwen4_exp"]
# DeepSeek sparse attention: the indexer's mask has one row per key-value head.
for _arch in ("axk2", "deepseek_v32", "glm_moe_dsa"):
    EXTRA[_arch] = {"num_key_value_heads": 4}
# DbrxAttention reads attn_config.rope_theta, which DbrxAttentionConfig does not define.
EXTRA["dbrx"] = {
    "attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0},
    "ffn_config": {"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2},
}
EXTRA["dots3_note_text"] = {"num_key_value_heads": 4, "head_dim": 16}  # SWA head = nope + rope
EXTRA["dots1"] = {"n_shared_experts": 1}
EXTRA["inkling2_text"] = EXTRA["inkling2_loop_text"] = {
    "unpadded_vocab_size": VOCAB,
    "swa_head_dim": 16,
}
EXTRA["granitemoehybrid"] = {"layer_types": ["mamba", "attention"]}
EXTRA["gemma4_text"] = {
    "enable_moe_block": True,
    "num_experts": 4,
    "top_k_experts": 2,
    "moe_intermediate_size": 32,
    "vocab_size_per_layer_input": VOCAB,
    "hidden_size_per_layer_input": 16,
}
# None in these means "derive it" or "use the default", so a None default gets the tiny value.
NONE_MEANS_DEFAULT = {"head_dim", "num_experts_per_tok", "n_routed_experts", "num_experts"}
MOE_CLASS = re.compile(r"Experts|SparseMoe|MoE|Moe")
MAX_PARAMS = 2_000_000


def architectures() -> list[str]:
    """Model types with a causal-LM class, in name order (MoE or not: ``build`` decides)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def _shrink_layer_types(types: list) -> list:
    """Two of a per-layer type list: an expert layer if there is one, and one of another type,
    full attention if there is one (hybrid models need an attention layer for their cache)."""
    first = next((t for t in types if isinstance(t, str) and re.search("moe|expert", t)), types[0])
    others = [t for t in types if t != first]
    full = [t for t in others if isinstance(t, str) and "attention" in t and "linear" not in t]
    return [first, (full or others or [first])[0]]


def _shrink(d: dict) -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v and all(str(i).isdigit() for i in v):  # per-layer dicts
            out[k] = {i: c for i, c in v.items() if int(i) < SMALL["num_hidden_layers"]}
        elif isinstance(v, dict) and k.endswith("_config"):
            out[k] = _shrink(v)
        elif k in SMALL and isinstance(v, int) and not isinstance(v, bool):
            out[k] = SMALL[k]
        elif k in NONE_MEANS_DEFAULT and v is None:
            out[k] = SMALL[k]
        elif isinstance(v, list) and v and re.search("layer.*type|block_type", k) and len(v) > 2:
            out[k] = _shrink_layer_types(v)
        elif isinstance(v, float) and (re.search("dropout|pdrop|jitter", k)):
            out[k] = 0.0
        else:
            out[k] = v
    if "qk_nope_head_dim" in out and "head_dim" in out:  # MLA: rope part of each head
        out["head_dim"] = out["qk_rope_head_dim"]
    if out.get("num_experts_per_tok", 0) is None:
        out["num_experts_per_tok"] = SMALL["num_experts_per_tok"]
    if "output_router_logits" in d:
        out["output_router_logits"] = True
    for k in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if isinstance(out.get(k), int) and out[k] >= VOCAB:
            out[k] = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}[k]
    return out


def causal_lm_class(arch: str):
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return getattr(transformers, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[arch])


def tiny_config(arch: str):
    cls = causal_lm_class(arch)
    base = cls.config_class()
    d = _shrink(base.to_dict())
    d.update(EXTRA.get(arch, {}))
    if isinstance(d.get("text_config"), dict):  # multimodal: the text model's own extras
        d["text_config"].update(EXTRA.get(d["text_config"].get("model_type"), {}))
    for k in ("model_type", "transformers_version", "architectures"):
        d.pop(k, None)
    return cls.config_class(**d)


def expert_modules(model) -> list[str]:
    return [n for n, m in model.named_modules() if MOE_CLASS.search(type(m).__name__)]


def defines_experts(arch: str) -> bool:
    """Whether the architecture's modeling module defines a routed-experts class."""
    import inspect

    src = inspect.getsource(sys.modules[causal_lm_class(arch).__module__])
    return bool(re.search(r"class \w*(" + MOE_CLASS.pattern + r")\w*\(", src))


def build(arch: str, seed: int = 0):
    """(cpu_model, neuron_model) with the same weights. Raises Unbuildable when the tiny config
    cannot make a small model with an expert layer."""
    from transformers import AutoModelForCausalLM

    cfg = tiny_config(arch)
    with torch.device("meta"):
        shape = AutoModelForCausalLM.from_config(cfg)
    if not expert_modules(shape):
        raise Unbuildable("the 2-layer config has no expert layer")
    params = sum(p.numel() for p in shape.parameters())
    if params > MAX_PARAMS:
        raise Unbuildable(f"{params} parameters: a size field this sweep does not shrink")
    torch.manual_seed(seed)
    cpu = AutoModelForCausalLM.from_config(cfg).float()
    cpu.train()
    dev = copy.deepcopy(cpu).to("neuron")
    return cpu, dev


class Unbuildable(Exception):
    pass


def _ids(seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, VOCAB, (BATCH, LENGTH), generator=g)


def _close(a, b, tol) -> str | None:
    try:
        torch.testing.assert_close(a, b, **tol)
    except AssertionError as e:
        return " ".join(str(e).split("\n")[:4])
    return None


def cpu_reference(cpu):
    ids = _ids()
    with sdpa_kernel(SDPBackend.MATH):
        loss = cpu(input_ids=ids, labels=ids).loss
    loss.backward()
    return ids, loss.detach()


def compare(cpu, dev, ids, loss_c) -> str | None:
    """One forward with labels and one backward on the device; None if loss and grads match."""
    ids_d = ids.to("neuron")
    neuronsim.clear_op_tracking()
    loss_d = dev(input_ids=ids_d, labels=ids_d).loss
    loss_d.backward()
    if loss_d.device.type != "neuron":
        return f"loss on {loss_d.device}"
    bad = _close(loss_d.detach().cpu(), loss_c, LOSS_TOL)
    if bad:
        return f"loss: {bad}"
    for (name, pc), pd in zip(cpu.named_parameters(), dev.parameters(), strict=True):
        if pc.grad is None:
            if pd.grad is not None and pd.grad.abs().max().item() != 0:
                return f"{name}: grad on neuron only"
            continue
        if pd.grad is None:
            return f"{name}: no grad on neuron"
        bad = _close(pd.grad.cpu(), pc.grad, GRAD_TOL)
        if bad:
            return f"{name} grad: {bad}"
    return None


def _first_line(e: Exception) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"


def run(arch: str) -> tuple[str, str | None]:
    """('not-moe'|'skip'|'pass'|'fail', reason or None). 'skip' is an MoE architecture this sweep
    cannot make a tiny model of, or whose tiny model fails on the CPU too: not the device's
    doing."""
    if not defines_experts(arch):
        return "not-moe", None
    try:
        cpu, dev = build(arch)
    except Exception as e:  # noqa: BLE001  (a config transformers cannot build tiny)
        return "skip", f"no tiny model: {_first_line(e)}"
    try:
        ids, loss_c = cpu_reference(cpu)
    except Exception as e:  # noqa: BLE001
        return "skip", f"fails on CPU too: {_first_line(e)}"
    try:
        reason = compare(cpu, dev, ids, loss_c)
    except Exception as e:  # noqa: BLE001  (reported per architecture)
        return "fail", _first_line(e)
    return ("fail", reason) if reason else ("pass", None)


def main(argv: list[str]) -> int:
    warnings.filterwarnings("ignore")
    import transformers

    transformers.logging.set_verbosity_error()
    archs = argv or architectures()
    passed, failed, skipped = [], [], []
    for arch in archs:
        t0 = time.perf_counter()
        status, reason = run(arch)
        dt = time.perf_counter() - t0
        if status == "not-moe":
            continue
        if status == "skip":
            skipped.append(arch)
            print(f"{arch:24s} skip  {reason}", flush=True)
            continue
        (passed if status == "pass" else failed).append(arch)
        fallback = ", ".join(sorted(neuronsim.get_fallback_ops())) or "none"
        print(
            f"{arch:24s} {status}  {dt:5.1f} s  CPU fallback: {fallback}  {reason or ''}",
            flush=True,
        )
    print(
        f"transformers {transformers.__version__}: {len(passed)} of {len(passed) + len(failed)} "
        "MoE architectures pass (forward + backward on neuron against CPU); "
        f"{len(skipped)} more not run (no tiny model, or failing on CPU)"
    )
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
