"""Attention as one flash attention program under torch.compile.

``neuronsim::sdpa(q, k, v, attn_mask, is_causal, scale)`` is a custom op the graph compiler
lowers to one attention region (kernels/attention.h: S and P stay on chip). Its value is
``F.scaled_dot_product_attention``'s; its backward recomputes the probabilities from q, k and v,
as flash attention's backward does, in plain ATen ops that AOT autograd traces into the backward
graph (compiled as usual, unfused attention). Two rewrites put it into graphs:

- ``rewrite_sdpa``: in dynamo's graph, before AOT autograd, ``scaled_dot_product_attention``
  calls without dropout or GQA, with no mask or an additive float one, become the op, so
  forward graphs of training keep it whole (the math path would otherwise decompose it and
  save P for the backward);
- ``rewrite_attention``: in an ATen graph, the device's fused sdpa op of an inference graph
  (``F.multi_head_attention_forward``, which dynamo keeps whole, reaches it without grad), and
  ``bmm(q, k^T)`` [view] [scaling by constants]
  ``_softmax(-1)`` [expand] [view] ``bmm(., v)`` (a hand-written attention after decomposition)
  becomes the op when nothing else reads the scores or probabilities (inference graphs: a
  training forward saves P for its backward, and stays unfused).

``NEURONSIM_FLASH_ATTENTION=0`` turns both rewrites off (attention then compiles as its parts).
"""

import operator
import os

import torch
import torch.fx
import torch.utils._pytree as pytree

_MAX_HEAD_DIM = 128  # the kernel's limit: the head dim is TensorE's contraction (partitions)
_DTYPES = (torch.float32, torch.bfloat16, torch.float16)

_SCHEMA = (
    "(Tensor q, Tensor k, Tensor v, Tensor? attn_mask, bool is_causal, float? scale) -> Tensor"
)


@torch.library.custom_op("neuronsim::sdpa", mutates_args=(), schema=_SCHEMA)
def sdpa(q, k, v, attn_mask, is_causal, scale):
    out = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale
    )
    return out.contiguous()


@sdpa.register_fake
def _(q, k, v, attn_mask, is_causal, scale):
    return q.new_empty((*q.shape[:-1], v.shape[-1]))


def _setup_context(ctx, inputs, output):
    q, k, v, attn_mask, is_causal, scale = inputs
    ctx.save_for_backward(q, k, v, attn_mask, output)
    ctx.is_causal = is_causal
    ctx.scale = scale


def _sum_to(x: torch.Tensor, shape) -> torch.Tensor:
    while x.dim() > len(shape):
        x = x.sum(0)
    for i, n in enumerate(shape):
        if n == 1 and x.shape[i] != 1:
            x = x.sum(i, keepdim=True)
    return x


def _backward(ctx, grad):
    q, k, v, mask, out = ctx.saved_tensors
    scale = ctx.scale if ctx.scale is not None else q.shape[-1] ** -0.5
    s = torch.matmul(q, k.transpose(-2, -1)) * scale
    if mask is not None:
        s = s + mask
    if ctx.is_causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(keep.logical_not(), float("-inf"))
    p = torch.softmax(s, dim=-1)
    dv = torch.matmul(p.transpose(-2, -1), grad)
    dp = torch.matmul(grad, v.transpose(-2, -1))
    # rowsum(dP * P) = rowsum(dO * O): a pass over [S, Dv] instead of [S, S] (flash backward)
    ds = p * (dp - (grad * out).sum(-1, keepdim=True))
    dq = torch.matmul(ds, k) * scale
    dk = torch.matmul(ds.transpose(-2, -1), q) * scale
    dmask = _sum_to(ds, mask.shape) if mask is not None and ctx.needs_input_grad[3] else None
    return dq, dk, dv, dmask, None, None


sdpa.register_autograd(_backward, setup_context=_setup_context)


def _known(cond) -> bool:
    """True when `cond` holds for every value of its symbols (dynamic shapes): the backend may
    not add guards."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    return bool(statically_known_true(cond))


def _fits(q, k, v) -> bool:
    """Operands the kernel takes: one float dtype on the device, equal batch dims, head dims
    up to 128."""
    ts = (q, k, v)
    if not all(isinstance(t, torch.Tensor) for t in ts):
        return False
    if not all(t.device.type == "neuron" and t.dtype == q.dtype and t.dim() >= 3 for t in ts):
        return False
    if q.dtype not in _DTYPES or not q.dim() == k.dim() == v.dim():
        return False
    same = [(a, b) for t in (k, v) for a, b in zip(q.shape[:-2], t.shape[:-2], strict=True)]
    same += [(k.shape[-1], q.shape[-1]), (v.shape[-2], k.shape[-2])]
    return all(_known(a == b) for a, b in same) and all(
        _known(d <= _MAX_HEAD_DIM) for d in (q.shape[-1], v.shape[-1])
    )


def _example(n):
    if not isinstance(n, torch.fx.Node):
        return None
    return n.meta.get("example_value", n.meta.get("val"))


def _additive_mask(mask, q, k) -> bool:
    """No mask, or a float mask of q's dtype on the device broadcastable to the scores (a bool
    mask keeps the decomposed path)."""
    if mask is None:
        return True
    if not isinstance(mask, torch.Tensor) or not isinstance(q, torch.Tensor):
        return False
    if mask.dtype != q.dtype or mask.device.type != "neuron" or mask.dim() > q.dim():
        return False
    scores = (*q.shape[:-1], k.shape[-2])
    return all(
        _known(m == 1) or _known(m == s)
        for m, s in zip(reversed(mask.shape), reversed(scores), strict=False)
    )


_SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
_SDPA_DEFAULTS = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None}


def _enabled() -> bool:
    return os.environ.get("NEURONSIM_FLASH_ATTENTION", "1") != "0"


def _eligible(a: dict) -> bool:
    """scaled_dot_product_attention arguments (example values) the op takes."""
    return (
        _additive_mask(a["attn_mask"], a["query"], a["key"])
        and a["dropout_p"] == 0.0
        and not a["enable_gqa"]
        and isinstance(a["is_causal"], bool)
        and (a["scale"] is None or (isinstance(a["scale"], float | int) and a["scale"] > 0))
        and _fits(a["query"], a["key"], a["value"])
    )


def _mha_forward_with_flash(*args, **kwargs):
    """F.multi_head_attention_forward with its scaled_dot_product_attention call made
    neuronsim::sdpa where eligible (dynamo keeps the function whole, so rewrite_sdpa never
    sees the call; AOT autograd traces this instead)."""
    functional = torch.nn.functional
    original = functional.scaled_dot_product_attention

    def routed(*sargs, **skw):
        a = dict(_SDPA_DEFAULTS, enable_gqa=False)
        a.update(zip(_SDPA_ARGS, sargs, strict=False))
        a.update(skw)
        if not _eligible(a):
            return original(*sargs, **skw)
        scale = None if a["scale"] is None else float(a["scale"])
        return torch.ops.neuronsim.sdpa(
            a["query"], a["key"], a["value"], a["attn_mask"], a["is_causal"], scale
        )

    functional.scaled_dot_product_attention = routed
    try:
        return functional.multi_head_attention_forward(*args, **kwargs)
    finally:
        functional.scaled_dot_product_attention = original


def rewrite_sdpa(gm: torch.fx.GraphModule) -> int:
    """Dynamo's graph: eligible scaled_dot_product_attention calls become neuronsim::sdpa, and
    F.multi_head_attention_forward calls route theirs to it. Returns how many calls changed."""
    if not _enabled():
        return 0
    targets = {torch._C._nn.scaled_dot_product_attention}
    count = 0
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is torch.nn.functional.multi_head_attention_forward:
            n.target = _mha_forward_with_flash
            count += 1
            continue
        if n.op != "call_function" or n.target not in targets:
            continue
        a = dict(_SDPA_DEFAULTS, enable_gqa=False)
        a.update(zip(_SDPA_ARGS, n.args, strict=False))
        a.update(n.kwargs)
        tensors = ("query", "key", "value", "attn_mask")
        if not _eligible({k: _example(v) if k in tensors else v for k, v in a.items()}):
            continue
        scale = None if a["scale"] is None else float(a["scale"])
        n.target = torch.ops.neuronsim.sdpa.default
        n.args = (a["query"], a["key"], a["value"], a["attn_mask"], a["is_causal"], scale)
        n.kwargs = {}
        count += 1
    if count:
        gm.graph.lint()
        gm.recompile()
    return count


def _is_neg_inf(x) -> bool:
    if isinstance(x, torch.fx.Node):
        return x.target is torch.ops.aten.scalar_tensor.default and x.args[0] == float("-inf")
    return x == float("-inf")


def _mask_ok(mask, q) -> bool:
    """A chain's mask the kernel takes: q's dtype, broadcast over the bmm's batch (dims before
    the last two all 1)."""
    if mask[0] == "fill":
        shape, dtype = _example(mask[1]).shape, q.dtype
    else:
        mv = _example(mask[1])
        if not isinstance(mv, torch.Tensor):
            return False
        shape, dtype = mv.shape, mv.dtype
    return dtype == q.dtype and len(shape) >= 2 and all(_known(d == 1) for d in shape[:-2])


def _additive(g: torch.fx.Graph, mask, q):
    """Inserts the chain's mask as an additive [Sq', Sk'] mask of q's dtype
    (masked_fill(cond, -inf) becomes where(cond, -inf, 0)); returns its node."""
    aten = torch.ops.aten
    if mask[0] == "fill":
        cond = mask[1]
        cv = _example(cond)
        scalars = []
        for value in (float("-inf"), 0.0):
            n = g.call_function(
                aten.scalar_tensor.default,
                (value,),
                {"dtype": q.dtype, "layout": torch.strided, "device": q.device},
            )
            n.meta["val"] = q.new_full((), value)
            scalars.append(n)
        m = g.call_function(aten.where.self, (cond, *scalars))
        m.meta["val"] = torch.where(cv, scalars[0].meta["val"], scalars[1].meta["val"])
    else:
        m = mask[1]
    mv = _example(m)
    if mv.dim() > 2:
        shape = list(mv.shape[-2:])
        m = g.call_function(aten.view.default, (m, shape))
        m.meta["val"] = mv.view(shape)
    return m


def _rewrite_fused_sdpa(gm: torch.fx.GraphModule) -> int:
    """An ATen graph: ``_scaled_dot_product_fused_attention_overrideable`` (what eager sdpa
    without grad dispatches to on the device, and so what AOT traces when dynamo kept a caller
    such as ``F.multi_head_attention_forward`` whole) whose only read result is the output
    becomes neuronsim::sdpa, with the conditions rewrite_sdpa puts on the functional call."""
    op = torch.ops.aten._scaled_dot_product_fused_attention_overrideable.default
    args = ("query", "key", "value", "attn_bias", "dropout_p", "is_causal", "return_debug_mask")
    count = 0
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target is not op:
            continue
        a = {"attn_bias": None, "dropout_p": 0.0, "is_causal": False, "scale": None}
        a.update(zip(args, n.args, strict=False))
        a.update(n.kwargs)
        users = list(n.users)
        q, k, v = (_example(a[x]) for x in ("query", "key", "value"))
        if (
            not all(u.target is operator.getitem and u.args[1] == 0 for u in users)
            or a["dropout_p"] != 0.0
            or not isinstance(a["is_causal"], bool)
            or not (a["scale"] is None or a["scale"] > 0)
            or not _additive_mask(_example(a["attn_bias"]), q, k)
            or not _fits(q, k, v)
        ):
            continue
        scale = None if a["scale"] is None else float(a["scale"])
        g = gm.graph
        with g.inserting_before(n):
            fused = g.call_function(
                torch.ops.neuronsim.sdpa.default,
                (a["query"], a["key"], a["value"], a["attn_bias"], a["is_causal"], scale),
            )
            fused.meta["val"] = q.new_empty((*q.shape[:-1], v.shape[-1]))
            # The op's output has the query's layout, which the graph's later views rely on.
            order = sorted(range(q.dim()), key=lambda d: (-q.stride(d), d))
            if order != list(range(q.dim())):
                inverse = sorted(range(q.dim()), key=lambda d: order[d])
                aten = torch.ops.aten
                dense = {"memory_format": torch.contiguous_format}
                for target, extra, kw in (
                    (aten.permute.default, (order,), {}),
                    (aten.clone.default, (), dense),
                    (aten.permute.default, (inverse,), {}),
                ):
                    prev = fused
                    fused = g.call_function(target, (prev, *extra), kw)
                    fused.meta["val"] = target(prev.meta["val"], *extra, **kw)
        for u in users:
            u.replace_all_uses_with(fused)
            gm.graph.erase_node(u)
        gm.graph.erase_node(n)
        count += 1
    return count


def rewrite_attention(gm: torch.fx.GraphModule) -> int:
    """An ATen graph: the device's fused sdpa op, and hand-written attention chains whose scores
    and probabilities nothing else reads, become neuronsim::sdpa. Returns how many."""
    if not _enabled():
        return 0
    count = _rewrite_fused_sdpa(gm)
    aten = torch.ops.aten
    views = {aten.view.default, aten._unsafe_view.default, aten.reshape.default}
    g = gm.graph
    outputs = set()
    for n in g.nodes:
        if n.op == "output":
            outputs = {x for x in pytree.tree_leaves(n.args) if isinstance(x, torch.fx.Node)}

    def private(x) -> bool:  # read only by the next node of the chain
        return (
            isinstance(x, torch.fx.Node)
            and x.op == "call_function"
            and len(x.users) == 1
            and x not in outputs
        )

    for bmm2 in list(g.nodes):
        if bmm2.op != "call_function" or bmm2.target is not aten.bmm.default:
            continue
        chain = []
        x = bmm2.args[0]
        for allowed in (views, {aten.expand.default}):
            if private(x) and x.target in allowed:
                chain.append(x)
                x = x.args[0]
        if not private(x) or x.target is not aten._softmax.default or x.args[2]:
            continue
        val = _example(x)
        if x.args[1] not in (-1, val.dim() - 1):
            continue
        chain.append(x)
        x = x.args[0]
        scale, mask, scaled = 1.0, None, False
        while private(x):
            a = x.args
            if (
                x.target in (aten.div.Tensor, aten.mul.Tensor)
                and isinstance(a[1], float | int)
                and not isinstance(a[1], bool)
                and a[1] != 0
            ):
                scale = scale / float(a[1]) if x.target is aten.div.Tensor else scale * float(a[1])
                scaled = True
            elif mask is None and x.target is aten.where.self and _is_neg_inf(a[1]):
                mask = ("fill", a[0], a[1])  # masked_fill(cond, -inf): any order with scaling
                chain.append(x)
                x = a[2]
                continue
            elif (
                mask is None
                and not scaled
                and x.target is aten.add.Tensor
                and isinstance(a[1], torch.fx.Node)
                and x.kwargs.get("alpha", 1) == 1
            ):
                mask = ("add", a[1])  # an additive mask after the scaling
            else:
                break
            chain.append(x)
            x = a[0]
        if private(x) and x.target in views:
            chain.append(x)
            x = x.args[0]
        if not private(x) or x.target is not aten.bmm.default or not scale > 0:
            continue
        bmm1 = x
        chain.append(bmm1)
        q, kt = bmm1.args
        v = bmm2.args[1]
        qv, ktv, vv = _example(q), _example(kt), _example(v)
        if not all(isinstance(t, torch.Tensor) for t in (qv, ktv, vv)):
            continue
        if _example(bmm2.args[0]).shape != _example(bmm1).shape:
            continue
        if any(_example(c).dtype != qv.dtype for c in chain):
            continue  # the softmax ran in another dtype
        if not _fits(qv, ktv.transpose(-2, -1), vv):
            continue
        if mask is not None and not _mask_ok(mask, qv):
            continue
        with g.inserting_before(bmm2):
            m = _additive(g, mask, qv) if mask is not None else None
            k = g.call_function(aten.transpose.int, (kt, -2, -1))
            k.meta["val"] = ktv.transpose(-2, -1)
            fused = g.call_function(torch.ops.neuronsim.sdpa.default, (q, k, v, m, False, scale))
            fused.meta["val"] = _example(bmm2)
        bmm2.replace_all_uses_with(fused)
        for n in [bmm2, *chain]:
            g.erase_node(n)
        count += 1
    if count:
        g.lint()
        gm.recompile()
    return count
