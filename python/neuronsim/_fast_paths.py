"""nn.MultiheadAttention's and nn.TransformerEncoderLayer's inference fast paths on the device.

In eval mode without grad these modules call ``aten::_native_multi_head_attention`` and
``aten::_transformer_encoder_layer_fwd`` (PyTorch treats the PrivateUse1 device as one that has
them), which ATen implements for CPU and CUDA only: the whole layer ran on the CPU fallback.
Here they are the slow path's own steps as device ops (linears, scaled scores, mask, softmax,
layer norms, the feed-forward), so every kernel is the device's.

Masks follow the fast path's conventions: additive float masks (or bool, True masked out);
mask_type 0 an attention mask [T, S], 1 a key padding mask [B, S], 2 merged [B, H, T, S]. As in
ATen, self-attention without weights and with a head dim divisible by 8 is one
scaled_dot_product_attention; otherwise scores, softmax (rows with every key masked give zeros,
as ATen's masked softmax does) and the weighted sum.

Nested tensors (nn.TransformerEncoder's padded-batch conversion) are not supported: converting
to one raises a NotImplementedError that says how to keep the padded batch.
"""

import torch
import torch.nn.functional as F

_lib = None


def _split_heads(x, heads):
    b, t, d = x.shape
    return x.view(b, t, heads, d // heads).transpose(1, 2)


def _mask_for_scores(mask, mask_type, b, s):
    if mask is None:
        return None
    if mask_type == 1:
        return mask.view(b, 1, 1, s)
    return mask


def native_multi_head_attention(
    query,
    key,
    value,
    embed_dim,
    num_head,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    mask=None,
    need_weights=True,
    average_attn_weights=True,
    mask_type=None,
):
    d = embed_dim
    if query is key and key is value:
        q, k, v = F.linear(query, qkv_weight, qkv_bias).chunk(3, dim=-1)
    else:
        wq, wk, wv = qkv_weight.chunk(3)
        bq, bk, bv = qkv_bias.chunk(3) if qkv_bias is not None else (None, None, None)
        q, k, v = F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)
    b, t, s = query.shape[0], query.shape[1], key.shape[1]
    q, k, v = (_split_heads(x, num_head) for x in (q, k, v))
    m = _mask_for_scores(mask, mask_type, b, s)
    if query is key and key is value and (d // num_head) % 8 == 0 and not need_weights:
        # ATen's own choice for this case: scaled_dot_product_attention (the device's flash
        # kernel without grad), the bool mask as its additive form.
        if m is not None and m.dtype == torch.bool:
            m = torch.zeros(m.shape, dtype=q.dtype, device=q.device).masked_fill(m, float("-inf"))
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
        return F.linear(ctx.transpose(1, 2).reshape(b, t, d), proj_weight, proj_bias), None
    scores = (q * (d // num_head) ** -0.5) @ k.transpose(-2, -1)
    if m is not None:
        scores = scores.masked_fill(m, float("-inf")) if m.dtype == torch.bool else scores + m
    attn = torch.softmax(scores, dim=-1)
    if m is not None:
        attn = attn.nan_to_num(0.0)  # every key masked: zeros (ATen's masked softmax)
    ctx = (attn @ v).transpose(1, 2).reshape(b, t, d)
    out = F.linear(ctx, proj_weight, proj_bias)
    if not need_weights:
        return out, None
    return out, attn.mean(1) if average_attn_weights else attn


def transformer_encoder_layer_fwd(
    src,
    embed_dim,
    num_heads,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    use_gelu,
    norm_first,
    eps,
    norm_weight_1,
    norm_bias_1,
    norm_weight_2,
    norm_bias_2,
    ffn_weight_1,
    ffn_bias_1,
    ffn_weight_2,
    ffn_bias_2,
    mask=None,
    mask_type=None,
):
    def attention(x):
        return native_multi_head_attention(
            x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
            mask, False, True, mask_type,
        )[0]  # fmt: skip

    def ffn(x):
        h = F.linear(x, ffn_weight_1, ffn_bias_1)
        return F.linear(F.gelu(h) if use_gelu else F.relu(h), ffn_weight_2, ffn_bias_2)

    def ln1(x):
        return F.layer_norm(x, (embed_dim,), norm_weight_1, norm_bias_1, eps)

    def ln2(x):
        return F.layer_norm(x, (embed_dim,), norm_weight_2, norm_bias_2, eps)

    x = src
    if norm_first:
        x = x + attention(ln1(x))
        return x + ffn(ln2(x))
    x = ln1(x + attention(x))
    return ln2(x + ffn(x))


def nested_tensor_from_mask(t, mask, mask_check=True):
    raise NotImplementedError(
        "neuron: nested tensors are not supported on the neuron device. nn.TransformerEncoder "
        "converts a padded batch to one in eval mode without grad when given "
        "src_key_padding_mask; construct it with enable_nested_tensor=False (the layers then "
        "take the padded batch and the mask)"
    )


def register() -> None:
    global _lib  # noqa: PLW0603
    if _lib is not None:
        return
    _lib = torch.library.Library("aten", "IMPL")
    _lib.impl("_native_multi_head_attention", native_multi_head_attention, "PrivateUse1")
    _lib.impl("_transformer_encoder_layer_fwd", transformer_encoder_layer_fwd, "PrivateUse1")
    _lib.impl("_nested_tensor_from_mask", nested_tensor_from_mask, "PrivateUse1")
