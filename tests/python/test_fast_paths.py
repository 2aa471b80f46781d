"""nn.TransformerEncoderLayer and nn.MultiheadAttention in eval mode without grad take PyTorch's
fast paths (aten::_transformer_encoder_layer_fwd, aten::_native_multi_head_attention), which
ATen has for CPU and CUDA only: on the device they are the slow path's steps as device ops
(python/neuronsim/_fast_paths.py), matching the CPU's fast path without the CPU fallback."""

import copy

import neuronsim
import pytest
import torch
import torch.nn as nn
from neuronsim import _C

torch.manual_seed(0)
X = torch.randn(2, 10, 64)
KPM = torch.zeros(2, 10, dtype=torch.bool)
KPM[0, 7:] = True
CAUSAL = torch.triu(torch.ones(10, 10, dtype=torch.bool), 1)
MASKS = {
    "none": {},
    "key_padding": {"src_key_padding_mask": KPM},
    "causal": {"src_mask": CAUSAL},
    "both": {"src_mask": CAUSAL, "src_key_padding_mask": KPM},
}


def _on(kw, device):
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}


@pytest.mark.parametrize("isa", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("masks", sorted(MASKS))
def test_encoder_layer_fast_path_runs_on_the_device(masks, activation, norm_first, isa):
    torch.manual_seed(1)
    layer = nn.TransformerEncoderLayer(
        64, 4, 128, batch_first=True, norm_first=norm_first, activation=activation
    ).eval()
    dev = copy.deepcopy(layer).to("neuron")
    with torch.no_grad():
        want = layer(X, **MASKS[masks])
        _C._set_isa_mode(isa)
        try:
            neuronsim.clear_op_tracking()
            got = dev(X.to("neuron"), **_on(MASKS[masks], "neuron"))
            assert not neuronsim.get_fallback_ops()
        finally:
            _C._set_isa_mode(False)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "case", ["self", "cross", "cross_key_padding", "no_weights", "per_head_weights"]
)
def test_multihead_attention_fast_path_runs_on_the_device(case):
    torch.manual_seed(2)
    mha = nn.MultiheadAttention(64, 4, batch_first=True).eval()
    dev = copy.deepcopy(mha).to("neuron")
    y, kv = torch.randn(2, 9, 64), torch.randn(2, 12, 64)
    kpm = torch.zeros(2, 12, dtype=torch.bool)
    kpm[1, 5:] = True
    args, kw = {
        "self": ((X, X, X), {}),
        "cross": ((y, kv, kv), {}),
        "cross_key_padding": ((y, kv, kv), {"key_padding_mask": kpm}),
        "no_weights": ((X, X, X), {"need_weights": False}),
        "per_head_weights": ((X, X, X), {"average_attn_weights": False}),
    }[case]
    with torch.no_grad():
        want_out, want_w = mha(*args, **kw)
        neuronsim.clear_op_tracking()
        out, w = dev(*(a.to("neuron") for a in args), **_on(kw, "neuron"))
        assert not neuronsim.get_fallback_ops()
    torch.testing.assert_close(out.cpu(), want_out, rtol=1e-5, atol=1e-5)
    assert (w is None) == (want_w is None)
    if w is not None:
        torch.testing.assert_close(w.cpu(), want_w, rtol=1e-5, atol=1e-6)


def test_encoder_with_nested_tensors_says_how_to_keep_the_padded_batch():
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 4, 128, batch_first=True), 2)
    dev = copy.deepcopy(enc).to("neuron").eval()
    with torch.no_grad(), pytest.raises(NotImplementedError, match="enable_nested_tensor=False"):
        dev(X.to("neuron"), src_key_padding_mask=KPM.to("neuron"))
    enc = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(64, 4, 128, batch_first=True), 2, enable_nested_tensor=False
    ).eval()
    dev = copy.deepcopy(enc).to("neuron")
    with torch.no_grad():
        want = enc(X, src_key_padding_mask=KPM)
        got = dev(X.to("neuron"), src_key_padding_mask=KPM.to("neuron"))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
