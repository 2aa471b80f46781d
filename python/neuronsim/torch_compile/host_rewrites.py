"""Rewrites of a compiled graph's host copy (runner.build_host_module): fast mode's host run then
computes the same values in fewer passes over memory. Only the host copy changes: the graph
compiler's fused programs, and so simulated time, HBM bytes and launches, stay those of the
decomposed graph.

- Stacked selects: select_backward's decomposition writes each part's gradient into zeros
  through a constant one-hot mask, ``where(mask_i, expand(unsqueeze(g_i, d)), 0)``, and adds the
  results (the backward of ``q, k, v = qkv``, three selects): per part a fill and a pass over the
  stacked shape, plus the adds. When the parts cover every index of d once, that sum is
  ``stack(g, d)``.
- Layer norm backward: ``native_layer_norm_backward`` decomposes into a dozen elementwise ops and
  reductions over the activations (x - mean, its product with rstd, dy * w, two row sums, ...);
  over the last dim, its CPU kernel computes dx (and dw, when the graph sums dy * x_hat) in one.
- Layout-only values: a value only the fused programs read (its node's one reader is the
  output's tuple of program values) needs memory of its layout, not its contents: in fast mode
  the programs only time it. Its computation goes (after the layer norm rewrite, dy * x_hat
  when the graph's dw comes from the CPU kernel).
- Common subexpressions: the attention backward copies the same expanded q and dO twice (one
  contiguous copy per bmm that reads it); in a graph that mutates nothing, an op repeated with
  the same arguments runs once.
- Foreach lerp: ``_foreach_lerp`` (AdamW's first moment) decomposes into ``_foreach_sub``, a
  ``full_like`` weight per tensor and ``_foreach_addcmul``; one ``_foreach_lerp`` (eager mode's
  kernel) computes it.
- Foreach in place: a ``_foreach_*`` op's out= overload (the optimizer's updates of its inputs,
  runner.write_results_into_inputs) allocates its results and copies them into ``out``, and a
  functional one allocates too. The in-place overload writes where eager mode's does: when
  ``out`` is the op's first list; when that list is a foreach result on ``out``
  (``mul(exp_avg_sq, beta2)`` before ``addcmul(..., out=exp_avg_sq)``: both then run in place,
  when nothing between them reads ``out``); when a functional op's first list holds fresh
  results nothing reads afterwards."""

from __future__ import annotations

import operator

import torch
import torch.fx
import torch.utils._pytree as pytree

aten = torch.ops.aten


def _val(n) -> torch.Tensor | None:
    v = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
    return v if isinstance(v, torch.Tensor) else None


def _is_zero_fill(n, shape, dtype) -> bool:
    if not isinstance(n, torch.fx.Node) or n.target is not aten.full.default:
        return False
    v = _val(n)
    return v is not None and v.shape == shape and v.dtype == dtype and n.args[1] == 0


def _one_hot_index(mask: torch.Tensor, d: int) -> int | None:
    """i when `mask` is size 1 on every dim but d and True exactly at index i of d."""
    if mask.dtype != torch.bool or any(s != 1 for k, s in enumerate(mask.shape) if k != d):
        return None
    hot = mask.detach().to("cpu").reshape(-1).nonzero().reshape(-1).tolist()
    return hot[0] if len(hot) == 1 else None


def _select_part(n, constants: dict):
    """(g, d, i, n) when node `n` is where(one-hot mask on dim d at i, g broadcast on d, 0)."""
    if not isinstance(n, torch.fx.Node) or n.target is not aten.where.self or len(n.args) != 3:
        return None
    mask, a, zero = n.args
    out = _val(n)
    if out is None or mask not in constants:
        return None
    if not isinstance(a, torch.fx.Node) or a.target is not aten.expand.default:
        return None
    u = a.args[0]
    if not isinstance(u, torch.fx.Node) or u.target is not aten.unsqueeze.default:
        return None
    g, d = u.args
    gv = _val(g)
    d = d % out.dim()
    if gv is None or gv.dtype != out.dtype or tuple(a.args[1]) != tuple(out.shape):
        return None
    if tuple(gv.shape) != tuple(s for k, s in enumerate(out.shape) if k != d):
        return None
    if not _is_zero_fill(zero, out.shape, out.dtype):
        return None
    m = constants[mask]
    if not isinstance(m, torch.Tensor) or m.dim() != out.dim():
        return None
    i = _one_hot_index(m, d)
    return None if i is None else (g, d, i, out.shape[d])


def _add_leaves(n, root: bool) -> list:
    """The operands of the tree of add.Tensor nodes under `n` (inner adds used only there)."""
    is_add = (
        isinstance(n, torch.fx.Node)
        and n.target is aten.add.Tensor
        and not n.kwargs
        and len(n.args) == 2
        and (root or len(n.users) == 1)
    )
    if not is_add:
        return [n]
    return _add_leaves(n.args[0], False) + _add_leaves(n.args[1], False)


def _erase_dead(g: torch.fx.Graph, nodes) -> None:
    pending = [n for n in nodes if isinstance(n, torch.fx.Node)]
    changed = True
    while changed:
        changed = False
        for n in list(pending):
            if not n._erased and not n.users and n.op == "call_function" and not n.is_impure():
                pending.extend(x for x in n.all_input_nodes if x not in pending)
                g.erase_node(n)
                pending.remove(n)
                changed = True


def stack_selects(g: torch.fx.Graph, constants: dict) -> int:
    rewritten = 0
    for n in list(g.nodes):
        if n._erased or n.target is not aten.add.Tensor:
            continue
        leaves = _add_leaves(n, True)
        if len(leaves) < 2:
            continue
        parts = [_select_part(x, constants) for x in leaves]
        if any(p is None for p in parts):
            continue
        d, size = parts[0][1], parts[0][3]
        by_index = {p[2]: p[0] for p in parts}
        if any(p[1] != d or p[3] != size for p in parts) or sorted(by_index) != list(range(size)):
            continue
        if len(parts) != size:
            continue
        with g.inserting_before(n):
            s = g.call_function(aten.stack.default, ([by_index[i] for i in range(size)], d))
        s.meta = dict(n.meta)
        n.replace_all_uses_with(s)
        _erase_dead(g, [n])
        rewritten += 1
    return rewritten


def _is(n, target) -> bool:
    return isinstance(n, torch.fx.Node) and n.target is target and not n.kwargs


def _mul_operands(n, first_is):
    """(a, b) when n is mul.Tensor(a, b) or mul.Tensor(b, a) and first_is(a)."""
    if not _is(n, aten.mul.Tensor) or len(n.args) != 2:
        return None
    a, b = n.args
    if first_is(a):
        return a, b
    if first_is(b):
        return b, a
    return None


def _row_sum_of(n, last: int):
    """x when n is sum(x, [last dim], keepdim=True)."""
    if not _is(n, aten.sum.dim_IntList) or len(n.args) != 3 or n.args[2] is not True:
        return None
    dims = n.args[1]
    return n.args[0] if len(dims) == 1 and dims[0] in (-1, last) else None


def _layer_norm_dx(n):
    """(dy, x, mean, rstd, w, x_hat, N) when node n is the decomposed layer norm backward's dx
    over the last dim: rstd / N * ((dy * w) * N - rowsum(dy * w) - x_hat * rowsum(dy * w *
    x_hat)), x_hat = (x - mean) * rstd."""
    out = _val(n)
    if out is None or out.dim() < 2:
        return None
    last = out.dim() - 1
    m = _mul_operands(n, lambda a: _is(a, aten.div.Tensor))
    if m is None or not _is(m[1], aten.sub.Tensor):
        return None
    (div, sub2), size = m, out.shape[-1]
    rstd = div.args[0]
    if div.args[1] != size:
        return None
    sub1, mul4 = sub2.args
    if not _is(sub1, aten.sub.Tensor):
        return None
    mul2, sum3 = sub1.args
    if not _is(mul2, aten.mul.Tensor) or mul2.args[1] != size:
        return None
    dyw = mul2.args[0]
    if _row_sum_of(sum3, last) is not dyw:
        return None
    m4 = _mul_operands(mul4, lambda a: _row_sum_of(a, last) is not None)
    if m4 is None:
        return None
    sum4, x_hat = m4
    m3 = _mul_operands(_row_sum_of(sum4, last), lambda a: a is dyw)
    if m3 is None or m3[1] is not x_hat:
        return None
    mh = _mul_operands(x_hat, lambda a: _is(a, aten.sub.Tensor))
    if mh is None or mh[1] is not rstd:
        return None
    x, mean = mh[0].args
    mw = _mul_operands(dyw, lambda a: _val(a) is not None and tuple(_val(a).shape) == (size,))
    if mw is None:
        return None
    w, dy = mw
    vals = [_val(t) for t in (dy, x, mean, rstd)]
    if any(v is None for v in vals) or vals[0].shape != out.shape or vals[1].shape != out.shape:
        return None
    if any(v.shape != (*out.shape[:-1], 1) for v in vals[2:]):
        return None
    if any(v.dtype != out.dtype for v in vals) or _val(w).dtype != out.dtype:
        return None
    return dy, x, mean, rstd, w, x_hat, size


def layer_norm_backward(g: torch.fx.Graph) -> int:
    rewritten = 0
    for n in list(g.nodes):
        if n._erased or not _is(n, aten.mul.Tensor):
            continue
        found = _layer_norm_dx(n)
        if found is None:
            continue
        dy, x, mean, rstd, w, x_hat, size = found
        # dw: the sum over the leading dims of dy * x_hat, when the graph computes it.
        lead = list(range(_val(n).dim() - 1))
        dw = None
        for u in x_hat.users:
            pair = _mul_operands(u, lambda a, dy=dy: a is dy)
            if pair is None or pair[1] is not x_hat:
                continue
            for s in u.users:
                if _is(s, aten.sum.dim_IntList) and list(s.args[1]) == lead and len(s.args) == 2:
                    dw = s
        with g.inserting_before(n):
            mask = [True, dw is not None, False]
            b = g.call_function(
                aten.native_layer_norm_backward.default,
                (dy, x, [size], mean, rstd, w, None, mask),
            )
            dx = g.call_function(operator.getitem, (b, 0))
            if dw is not None:
                grad_w = g.call_function(operator.getitem, (b, 1))
        dx.meta = dict(n.meta)
        n.replace_all_uses_with(dx)
        dead = [n]
        if dw is not None:
            grad_w.meta = dict(dw.meta)
            dw.replace_all_uses_with(grad_w)
            dead.append(dw)
        _erase_dead(g, dead)
        rewritten += 1
    return rewritten


def layout_only_values(g: torch.fx.Graph) -> int:
    output = next(n for n in reversed(g.nodes) if n.op == "output")
    outs, values = output.args[0]
    returned = {x for x in pytree.tree_leaves(outs) if isinstance(x, torch.fx.Node)}
    rewritten = 0
    for n in values:
        v = _val(n)
        if (
            n in returned
            or v is None
            or n.op != "call_function"
            or set(n.users) != {output}
            or n.is_impure()
            or _creates_alias(n)
        ):
            continue
        with g.inserting_before(n):
            e = g.call_function(
                aten.empty_strided.default,
                (list(v.shape), list(v.stride())),
                {"dtype": v.dtype, "device": torch.device("cpu")},
            )
        e.meta = dict(n.meta)
        n.replace_all_uses_with(e)
        _erase_dead(g, [n])
        rewritten += 1
    return rewritten


def _hashable(x):
    if isinstance(x, list | tuple):
        return tuple(_hashable(y) for y in x)
    if isinstance(x, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in x.items()))
    hash(x)  # raises for anything else unhashable
    return (type(x), x) if isinstance(x, float | int | bool) else x


def common_subexpressions(g: torch.fx.Graph) -> int:
    calls = [n for n in g.nodes if n.op == "call_function"]
    if any(n.is_impure() for n in calls):
        return 0  # a mutation between two reads would make them differ
    # Outputs stay distinct tensors (the caller may write one of them).
    output = next(n for n in reversed(g.nodes) if n.op == "output")
    returned = {x for x in pytree.tree_leaves(output.args[0][0]) if isinstance(x, torch.fx.Node)}
    seen: dict = {}
    rewritten = 0
    for n in calls:
        t = n.target
        if not isinstance(t, torch._ops.OpOverload) or torch.Tag.nondeterministic_seeded in t.tags:
            continue
        try:
            key = (t, _hashable(n.args), _hashable(n.kwargs))
        except TypeError:
            continue
        first = seen.setdefault(key, n)
        if first is not n and n not in returned and first not in returned:
            n.replace_all_uses_with(first)
            g.erase_node(n)
            rewritten += 1
    return rewritten


def _getitems_of(nodes, source) -> bool:
    return all(
        isinstance(x, torch.fx.Node)
        and x.target is operator.getitem
        and x.args[0] is source
        and x.args[1] == i
        for i, x in enumerate(nodes)
    )


def foreach_lerp(g: torch.fx.Graph) -> int:
    rewritten = 0
    for n in list(g.nodes):
        if n._erased or n.target not in (
            aten._foreach_addcmul.Scalar,
            aten._foreach_addcmul.Scalar_out,
        ):
            continue
        if len(n.args) != 3 or set(n.kwargs) - {"out"} or n.kwargs.get("value", 1) != 1:
            continue
        start, weights, diffs = n.args
        if not diffs or not isinstance(diffs, list | tuple) or len(weights) != len(diffs):
            continue
        sub = diffs[0].args[0] if isinstance(diffs[0], torch.fx.Node) else None
        if sub is None or sub.target is not aten._foreach_sub.List or not _getitems_of(diffs, sub):
            continue
        end, minus = sub.args[0], sub.args[1]
        if sub.kwargs or list(minus) != list(start):
            continue
        ws = set()
        for w, dx in zip(weights, diffs, strict=True):
            ok = (
                isinstance(w, torch.fx.Node)
                and w.target is aten.full_like.default
                and w.args[0] is dx
                and set(w.kwargs) <= {"pin_memory"}
            )
            if not ok:
                break
            ws.add(w.args[1])
        else:
            if len(ws) != 1:
                continue
            weight = ws.pop()
            out = n.kwargs.get("out")
            with g.inserting_before(n):
                if out is None:
                    lerp = g.call_function(aten._foreach_lerp.Scalar, (start, end, weight))
                else:
                    lerp = g.call_function(
                        aten._foreach_lerp.Scalar_out, (start, end, weight), {"out": out}
                    )
            lerp.meta = dict(n.meta)
            n.replace_all_uses_with(lerp)
            g.erase_node(n)
            _erase_dead(g, [*weights, *diffs, sub])
            rewritten += 1
    return rewritten


def _in_place_overload(op):
    """The in-place twin of a foreach op or of its out= overload, or None."""
    if not isinstance(op, torch._ops.OpOverload):
        return None
    name = op._schema.name
    if not name.startswith("aten::_foreach_") or name.endswith("_"):
        return None
    ov = op._overloadname
    base = ov[: -len("_out")] if ov.endswith("_out") else ("default" if ov == "out" else ov)
    packet = getattr(aten, name.split("::")[1] + "_", None)
    return getattr(packet, base, None) if packet is not None else None


def _creates_alias(n) -> bool:
    t = n.target
    if not isinstance(t, torch._ops.OpOverload):
        return False
    return any(r.alias_info is not None for r in t._schema.returns)


def _fresh_results(p) -> bool:
    """Whether `p` is a functional foreach op (new tensors, no aliases of its inputs)."""
    return (
        isinstance(p, torch.fx.Node)
        and _in_place_overload(p.target) is not None
        and not p.target._overloadname.endswith("out")
        and not _creates_alias(p)
    )


def _results_match(n, tensors) -> bool:
    vals = n.meta.get("val")
    if not isinstance(vals, list | tuple) or len(vals) != len(tensors):
        return False
    for v, t in zip(vals, tensors, strict=True):
        tv = _val(t)
        if tv is None or not isinstance(v, torch.Tensor):
            return False
        if v.shape != tv.shape or v.dtype != tv.dtype:
            return False
    return True


def _make_in_place(g: torch.fx.Graph, n, results) -> None:
    """Replaces foreach node `n` by its in-place twin; `results` (the tensors it writes) replace
    its results' getitems."""
    with g.inserting_before(n):
        kwargs = {k: v for k, v in n.kwargs.items() if k != "out"}
        m = g.call_function(_in_place_overload(n.target), n.args, kwargs)
    for u in list(n.users):
        u.replace_all_uses_with(results[u.args[1]])
        g.erase_node(u)
    g.erase_node(n)
    m.meta = {}


def foreach_in_place(g: torch.fx.Graph) -> int:
    rewritten = 0
    for n in list(g.nodes):
        if n._erased or n.op != "call_function" or _in_place_overload(n.target) is None:
            continue
        lists = [a for a in n.args if isinstance(a, list | tuple)]
        first = n.args[0] if n.args else None
        if (
            not isinstance(first, list | tuple)
            or not first
            or any(not isinstance(x, torch.fx.Node) for x in first)
        ):
            continue
        if any(u.target is not operator.getitem for u in n.users) or len(set(first)) != len(first):
            continue
        # Elementwise: reading first[i] while writing it is fine, another position is not.
        if any(x in first and first[j] is not x for a in lists[1:] for j, x in enumerate(a)):
            continue
        order = {x: i for i, x in enumerate(g.nodes)}
        out = n.kwargs.get("out")
        if out is not None:
            out = list(out)
            if list(first) == out:
                _make_in_place(g, n, out)
                rewritten += 1
                continue
            # The first list is a foreach result on `out` that only this op reads.
            p = first[0].args[0] if first[0].target is operator.getitem else None
            if not _fresh_results(p) or not _getitems_of(first, p) or list(p.args[0]) != out:
                continue
            if any(len(x.users) != 1 for x in first) or len(p.users) != len(first):
                continue
            if not _results_match(p, out):
                continue
            others = {x for a in n.args[1:] for x in (a if isinstance(a, list | tuple) else [a])}
            if any(x in others for x in out):
                continue
            # In place, `p` writes `out` at its own position: nothing up to `n` may read it.
            between = range(order[p] + 1, order[n])
            readers = [u for x in out for u in x.users if u is not p and u is not n]
            if any(
                order[u] in between or (order[u] < order[p] and _creates_alias(u)) for u in readers
            ):
                continue
            _make_in_place(g, p, out)
            _make_in_place(g, n, out)
            rewritten += 2
            continue
        # A functional op on fresh results nothing reads afterwards: in place on them.
        if not all(x.target is operator.getitem and _fresh_results(x.args[0]) for x in first):
            continue
        if not _results_match(n, first):
            continue
        readers = [u for x in first for u in x.users if u is not n]
        if any(order[u] > order[n] or _creates_alias(u) for u in readers):
            continue
        _make_in_place(g, n, list(first))
        rewritten += 1
    return rewritten


def rewrite_host_graph(g: torch.fx.Graph, constants: dict) -> int:
    """All rewrites, in place; `constants` maps the nodes of the graph's constants to their
    tensors. Returns how many applied."""
    n = stack_selects(g, constants) + layer_norm_backward(g) + common_subexpressions(g)
    n += foreach_lerp(g) + foreach_in_place(g)
    return n + layout_only_values(g)  # last: the others leave values only the programs read
