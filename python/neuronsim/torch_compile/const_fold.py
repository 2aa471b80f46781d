"""Constant folding: nodes that depend on no graph input (a causal mask built from arange, the
index masks of select_backward) are computed once, when the graph is compiled, and become
constants of the compiled graph, as the Neuron compiler folds them into the program's data.
Random and mutating ops are never folded."""

from __future__ import annotations

import torch
import torch.fx
import torch.utils._pytree as pytree

_MAX_FOLDED_ELEMENTS = 1 << 16
_FILLS = {
    torch.ops.aten.full,
    torch.ops.aten.full_like,
    torch.ops.aten.zeros,
    torch.ops.aten.zeros_like,
    torch.ops.aten.ones,
    torch.ops.aten.ones_like,
    torch.ops.aten.scalar_tensor,
    torch.ops.aten.empty,
}


def _foldable(n: torch.fx.Node) -> bool:
    if n.op != "call_function":
        return False
    target = n.target
    if isinstance(target, torch._ops.OpOverload):
        if torch.Tag.nondeterministic_seeded in target.tags:
            return False
        return not any(
            a.alias_info is not None and a.alias_info.is_write for a in target._schema.arguments
        )
    return getattr(target, "__module__", "") == "_operator"  # getitem


def _evaluate(gm: torch.fx.GraphModule, constant: dict) -> dict | None:
    """Values of the constant nodes (real tensors), or None when a size is still symbolic."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    values: dict = {}
    with unset_fake_temporarily():
        for n in gm.graph.nodes:
            if n not in constant:
                continue
            args, kwargs = pytree.tree_map(
                lambda x: values[x] if isinstance(x, torch.fx.Node) else x, (n.args, n.kwargs)
            )
            leaves = pytree.tree_leaves((args, kwargs))
            if any(isinstance(x, torch.SymInt | torch.SymFloat | torch.SymBool) for x in leaves):
                return None
            values[n] = n.target(*args, **kwargs)
    return values


def fold_constants(gm: torch.fx.GraphModule) -> int:
    """Folds in place; returns how many nodes became constants."""
    constant: dict = {}
    for n in gm.graph.nodes:
        if not _foldable(n):
            continue
        inputs = [x for x in pytree.tree_leaves((n.args, n.kwargs)) if isinstance(x, torch.fx.Node)]
        if all(x in constant for x in inputs):
            constant[n] = None
    # The frontier: constant tensors something else uses. A plain fill stays in the graph (a
    # fused program writes it without reading memory), and so does anything large.
    frontier = [
        n
        for n in constant
        if any(u not in constant for u in n.users)
        and isinstance(n.meta.get("val"), torch.Tensor)
        and n.meta["val"].numel() <= _MAX_FOLDED_ELEMENTS
        and getattr(n.target, "overloadpacket", None) not in _FILLS
    ]
    if not frontier:
        return 0
    # Evaluate only what the folded values need.
    needed: dict = {}
    stack = list(frontier)
    while stack:
        n = stack.pop()
        if n in needed:
            continue
        needed[n] = None
        stack.extend(
            x for x in pytree.tree_leaves((n.args, n.kwargs)) if isinstance(x, torch.fx.Node)
        )
    try:
        values = _evaluate(gm, needed)
    except Exception:  # noqa: BLE001 - folding is an optimisation; the graph runs unfolded
        return 0
    if values is None:
        return 0
    for i, n in enumerate(frontier):
        name = f"_neuron_constant_{i}"
        gm.register_buffer(name, values[n], persistent=False)
        with gm.graph.inserting_before(n):
            attr = gm.graph.get_attr(name)
        attr.meta["val"] = values[n]
        n.replace_all_uses_with(attr)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return len(frontier)
