"""topk, sort and cumsum over long rows (vocab-sized, as Hugging Face sampling does every
token) run on the device's long-row kernels (kernels/selection.h, Note [Long-row selection]):
topk and sort equal CPU exactly, cumsum within fp32 rounding; a tiny Llama's sampling generate
keeps all three off the CPU fallback.
"""

import warnings

import neuronsim
import pytest
import torch

SELECTION = {"aten::topk", "aten::sort"}
SAMPLING = SELECTION | {"aten::cumsum"}


def _base(names):
    return {n.split(".")[0] for n in names}


def _check_native(fn, x):
    neuronsim.clear_op_tracking()
    got = fn(x.to("neuron"))
    want = fn(x)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g.cpu(), w, rtol=0, atol=0, equal_nan=True)
    assert _base(neuronsim.get_fallback_ops()) & SELECTION == set()
    return _base(neuronsim.get_executed_ops()) & SELECTION


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(1, 32000), (3, 32000), (8, 32000), (2, 50257)], ids=str)
def test_vocab_rows_topk_and_sort_native_and_equal_cpu(shape, dtype):
    torch.manual_seed(shape[0])
    x = torch.randn(*shape).to(dtype)
    x[0, 7] = float("nan")  # NaN is the largest value for both ops
    x[-1, 100:140] = 2.5  # ties: lower index first
    assert _check_native(lambda t: torch.topk(t, 50), x) == {"aten::topk"}
    assert _check_native(lambda t: torch.topk(t, 50, largest=False), x) == {"aten::topk"}
    for descending in (True, False):
        ran = _check_native(lambda t, d=descending: torch.sort(t, descending=d, stable=True), x)
        assert ran == {"aten::sort"}
        ran = _check_native(lambda t, d=descending: torch.sort(t, dim=-1, descending=d), x)
        assert ran == {"aten::sort"}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_vocab_row_cumsum_and_cumprod_native(dtype):
    torch.manual_seed(0)
    probs = torch.rand(8, 32000).softmax(-1).to(dtype)
    for fn in (lambda t: t.cumsum(-1), lambda t: (1 + t / 4).cumprod(-1)):
        neuronsim.clear_op_tracking()
        got = fn(probs.to("neuron"))
        assert _base(neuronsim.get_fallback_ops()) & {"aten::cumsum", "aten::cumprod"} == set()
        # ISA mode computes the values with reassociated sums (products): fp32 rounding apart.
        tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {}
        torch.testing.assert_close(got.cpu(), fn(probs), **tol)


def test_vocab_row_cumsum_values_in_isa_mode():
    """ISA mode: the long-row scan's program computes the values (fp32 reassociation only)."""
    from neuronsim import _C

    torch.manual_seed(0)
    x = torch.rand(3, 50257)
    _C._set_isa_mode(True)
    try:
        got = x.to("neuron").cumsum(-1).cpu()
    finally:
        _C._set_isa_mode(False)
    torch.testing.assert_close(got, x.cumsum(-1), rtol=2e-5, atol=1e-5)


def _sim_us(fn):
    torch.neuron.synchronize()
    t0 = neuronsim.simulated_time_ns()
    fn()
    torch.neuron.synchronize()
    return (neuronsim.simulated_time_ns() - t0) / 1e3


def test_vocab_row_selection_time_is_sane():
    """One 32000-long row: far below the one-lane kernel's ~50 rounds x 8 instructions x 64000
    cycles (about 23 ms), and the O(n log^2 n) sort below 1 ms."""
    x = torch.randn(1, 32000, device="neuron")
    torch.topk(x, 50)
    torch.sort(x)
    assert _sim_us(lambda: torch.topk(x, 50)) < 1000
    assert _sim_us(lambda: torch.sort(x)) < 1000


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=32000,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    # Spread logits: with random init of std 0.02 every token is nearly equally likely.
    with torch.no_grad():
        model.lm_head.weight.normal_(0, 0.5)
    return model


def test_llama_sampling_generate_matches_cpu_without_sampling_fallback():
    model = _tiny_llama()
    ids = torch.tensor([[1, 306, 4658, 278, 6593]])
    kwargs = dict(do_sample=True, top_k=50, top_p=0.9, max_new_tokens=8, pad_token_id=0)
    with torch.no_grad():
        torch.manual_seed(123)
        want = model.generate(ids, **kwargs)
        dev_model = model.to("neuron")
        neuronsim.clear_op_tracking()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.manual_seed(123)
            got = dev_model.generate(ids.to("neuron"), **kwargs)
    assert _base(neuronsim.get_fallback_ops()) & SAMPLING == set()
    assert SAMPLING <= _base(neuronsim.get_executed_ops())
    assert torch.equal(got.cpu(), want)
