"""Hugging Face mixture-of-experts models, tiny (2 layers, 4 experts), trained one step on the
neuron device against the CPU: loss and every parameter gradient match.

The sweep over every MoE architecture the installed transformers ships is
``tests/python/hf_moe_sweep.py`` (about a minute; it prints "N of M pass"). CI runs the
architectures the issue names, one test each, plus the discovery that finds them.
"""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

import hf_moe_sweep as sweep  # noqa: E402

# The list, by model type: the router of each calls histc on integer expert indices.
NAMED = [
    "mixtral",
    "qwen2_moe",
    "qwen3_moe",
    "deepseek_v2",
    "deepseek_v3",
    "olmoe",
    "gpt_oss",
    "phimoe",
    "jamba",
    "granitemoe",
    "dbrx",
    "llama4_text",
    "qwen3_next",
]


def test_discovery_finds_the_named_moe_architectures():
    archs = sweep.architectures()
    assert set(NAMED) <= set(archs)
    assert all(sweep.defines_experts(a) for a in NAMED)
    assert not sweep.defines_experts("llama") and not sweep.defines_experts("gpt2")


@pytest.mark.parametrize("arch", NAMED)
def test_moe_forward_backward_matches_cpu(arch):
    status, reason = sweep.run(arch)
    assert status == "pass", reason


def test_tiny_config_has_an_expert_layer_and_router_loss():
    cfg = sweep.tiny_config("mixtral")
    assert cfg.num_hidden_layers == 2 and cfg.num_local_experts == 4
    assert cfg.output_router_logits  # the load-balancing loss (histc on expert indices) runs


def test_compare_catches_a_changed_expert_weight():
    """The check can fail: one expert weight nudged on the device shows in loss or gradients."""
    import torch

    cpu, dev = sweep.build("mixtral")
    ids, loss_c = sweep.cpu_reference(cpu)
    with torch.no_grad():
        next(p for n, p in dev.named_parameters() if "experts" in n).add_(1e-3)
    assert sweep.compare(cpu, dev, ids, loss_c) is not None
