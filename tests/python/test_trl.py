"""TRL's trainers on the neuron device, as its users write them: a tiny Llama and a word-level
tokenizer built in the test (nothing is downloaded), trained with SFTTrainer for two steps and
with DPOTrainer for two preference steps. transformers' Trainer picks the neuron device by itself
(``torch_neuronx`` is importable and ``torch.neuron.is_available()``); the reference is the same
trainer with ``use_cpu=True`` (on the math attention path, as neuron's with a gradient, and with
the batches padded to 128 as TRL pads them on neuron). Losses, the trained weights and the steps'
rewards must agree, the model must have trained on neuron, and no op may take the CPU fallback.
"""

from __future__ import annotations

import copy
import warnings

import neuronsim
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402
from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer  # noqa: E402

WORDS = "the a cat dog sat ran on under mat rug big small red blue quickly slowly".split()
TOL = {"rtol": 1e-4, "atol": 1e-5}


def _tokenizer() -> PreTrainedTokenizerFast:
    specials = ["<pad>", "<s>", "</s>", "<unk>"]
    vocab = {w: i for i, w in enumerate(specials + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
    )


def _model(tok) -> LlamaForCausalLM:
    torch.manual_seed(0)
    return LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tok),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=32,
            pad_token_id=tok.pad_token_id,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
        )
    )


def _sentence(i: int) -> str:
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(6 + i % 4))


def _common(tmp_path, use_cpu: bool) -> dict:
    # TRL pads batches to a multiple of 128 on neuron (static shapes for TorchNeuron's compile
    # cache; its configs set pad_to_multiple_of from the device): the CPU run pads the same way.
    return dict(
        pad_to_multiple_of=128 if use_cpu else "auto",
        output_dir=str(tmp_path / ("cpu" if use_cpu else "neuron")),
        use_cpu=use_cpu,
        per_device_train_batch_size=2,
        learning_rate=1e-2,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        seed=0,
        dataloader_pin_memory=False,
        disable_tqdm=True,
    )


def _sft(tmp_path, use_cpu: bool):
    tok = _tokenizer()
    model = _model(tok)
    data = datasets.Dataset.from_dict({"text": [_sentence(i) for i in range(8)]})
    args = SFTConfig(**_common(tmp_path, use_cpu), max_steps=2, max_length=16)
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tok)
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return losses, copy.deepcopy(dict(model.named_parameters())), model


def _dpo(tmp_path, use_cpu: bool):
    tok = _tokenizer()
    model, ref = _model(tok), _model(tok)
    data = datasets.Dataset.from_dict(
        {
            "prompt": [_sentence(i)[:20] for i in range(4)],
            "chosen": [" the cat sat on the mat" for _ in range(4)],
            "rejected": [" a dog ran under the rug" for _ in range(4)],
        }
    )
    args = DPOConfig(**_common(tmp_path, use_cpu), max_steps=2, max_length=24, beta=0.1)
    trainer = DPOTrainer(
        model=model, ref_model=ref, args=args, train_dataset=data, processing_class=tok
    )
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    return logs, copy.deepcopy(dict(model.named_parameters())), model


def _run(program, tmp_path):
    # The CPU reference takes the math attention path, as neuron does with a gradient: the same
    # arithmetic on both sides (Adam turns rounding in near-zero gradients into lr-sized steps).
    with sdpa_kernel(SDPBackend.MATH):
        cpu = program(tmp_path, True)
    neuronsim.clear_op_tracking()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dev = program(tmp_path, False)
    return cpu, dev, neuronsim.get_executed_ops(), neuronsim.get_fallback_ops()


def _check_params(cpu_params, dev_params):
    for name, p in dev_params.items():
        assert p.device.type == "neuron", name
        torch.testing.assert_close(p.detach().cpu(), cpu_params[name].detach(), **TOL)


def test_sft_trainer_matches_cpu_on_neuron(tmp_path):
    (cpu_losses, cpu_params, _), (losses, params, model), executed, fallbacks = _run(_sft, tmp_path)
    assert len(losses) == 2
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(cpu_losses), **TOL)
    _check_params(cpu_params, params)
    assert model.device.type == "neuron"
    assert {"aten::mm", "aten::_fused_adamw_"} & executed
    assert fallbacks == set(), sorted(fallbacks)


def test_dpo_step_matches_cpu_on_neuron(tmp_path):
    (cpu_logs, cpu_params, _), (logs, params, model), executed, fallbacks = _run(_dpo, tmp_path)
    keys = ["loss", "rewards/chosen", "rewards/rejected", "rewards/margins", "logps/chosen"]
    got = torch.tensor([[h[k] for k in keys] for h in logs])
    want = torch.tensor([[h[k] for k in keys] for h in cpu_logs])
    torch.testing.assert_close(got, want, **TOL)
    _check_params(cpu_params, params)
    assert model.device.type == "neuron"
    assert fallbacks == set(), sorted(fallbacks)
