"""The ``neuron`` torch.compile backend: dynamo's graph goes through AOT autograd (forward and
backward graphs, functionalised, decomposed to core ATen, input mutations kept in inference
graphs) and each ATen graph through the neuron graph compiler (kernels/graph): one launch per
graph (per segment when a node must run on the host), fused programs for the time.

Shapes are static by default. A graph with dynamic dimensions (``mark_dynamic``,
``dynamic=True``, or dynamo's automatic dynamic shapes after a size change) is compiled once per
concrete shape when it first runs with it; a size that depends on data (``nonzero``,
``.item()``) cannot be specialised that way, and such a graph runs with eager kernels (a
warning says why). A failure inside the compiler also falls back to eager kernels for that
graph, with a warning; ``NEURON_SIM_STRICT=1`` makes both an error."""

from __future__ import annotations

import operator
import os
import time
import warnings

import torch
import torch.fx

from neuronsim.torch_compile import stats
from neuronsim.torch_compile.attention import rewrite_attention, rewrite_sdpa
from neuronsim.torch_compile.const_fold import fold_constants
from neuronsim.torch_compile.fx_graph import (
    UnsupportedGraph,
    describe,
    is_collective,
    overlap_collectives,
)
from neuronsim.torch_compile.runner import Variant

# Identical graphs (same code, same input layouts) compile once per process: a model's repeated
# layers, a generate() loop re-entering dynamo, a graph recompiled after torch._dynamo.reset().
_cache: dict = {}
_counter = {"forward": 0, "backward": 0, "inference": 0}
_PREFIX = {"forward": "fw", "backward": "bw", "inference": "inf"}


def _strict() -> bool:
    # TorchNeuron's TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=1 has the same effect: a graph that
    # fails to compile raises instead of running eagerly.
    return (
        os.environ.get("NEURON_SIM_STRICT") == "1"
        or os.environ.get("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION") == "1"
    )


def _symbols_of(gm: torch.fx.GraphModule) -> bool:
    for n in gm.graph.nodes:
        val = n.meta.get("val")
        if isinstance(val, torch.SymInt):
            return True
        if isinstance(val, torch.Tensor) and any(
            isinstance(s, torch.SymInt) for s in (*val.shape, *val.stride())
        ):
            return True
    return False


def _bindings(gm: torch.fx.GraphModule, args) -> dict:
    """Symbol -> int from the placeholders' symbolic sizes and the actual arguments."""
    mapping: dict = {}

    def bind(s, x):
        if isinstance(s, torch.SymInt) and s.node.expr.is_Symbol:
            mapping[s.node.expr] = int(x)

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for n, a in zip(placeholders, args, strict=False):
        val = n.meta.get("val")
        if isinstance(val, torch.SymInt):
            bind(val, a)
        elif isinstance(val, torch.Tensor) and isinstance(a, torch.Tensor):
            for s, x in zip(val.shape, a.shape, strict=False):
                bind(s, x)
            for s, x in zip(val.stride(), a.stride(), strict=False):
                bind(s, x)
            bind(val.storage_offset(), a.storage_offset())
    return mapping


def _concrete(mapping: dict):
    def concrete(s):
        if isinstance(s, int | float | bool):
            return s
        import sympy

        value = sympy.sympify(s.node.expr)
        if mapping:
            value = sympy.sympify(value.xreplace(mapping))
        if not value.is_number:
            unbound = sorted(str(x) for x in value.free_symbols)
            raise UnsupportedGraph(
                f"a size depends on data ({', '.join(unbound)}: from nonzero/item-like ops); "
                "such graphs cannot be specialised per shape"
            )
        if isinstance(s, torch.SymBool):
            return bool(value)
        return float(value) if isinstance(s, torch.SymFloat) else int(value)

    return concrete


def _layout_key(args) -> tuple:
    key = []
    for a in args:
        if isinstance(a, torch.Tensor):
            key.append((a.dtype, tuple(a.shape), tuple(a.stride()), a.device.type))
        else:
            key.append(type(a).__name__)
    return tuple(key)


class CompiledGraph:
    """One AOT graph: compiled now when its shapes are static, per shape on first run otherwise;
    called by AOT autograd with boxed arguments (one list)."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs, kind: str):
        _counter[kind] += 1
        rewrite_attention(gm)
        self.folded = fold_constants(gm)
        overlap_collectives(gm)
        self.gm = gm
        self.kind = kind
        self.name = f"{_PREFIX[kind]}{_counter[kind] - 1}"
        self.nodes = sum(
            1
            for n in gm.graph.nodes
            if n.op == "call_function" and n.target is not operator.getitem
        )
        self.symbolic = _symbols_of(gm)
        self.variants: dict = {}
        self.fallback: str | None = None
        if not self.symbolic:
            self._compile(None, example_inputs, first=True)
        else:
            # Counted now; each shape compiles (and is counted) when it first runs.
            stats.record_graph(self._entry(0.0, None, None, dynamic=True))

    def __call__(self, args):
        if self.fallback is not None:
            return self.gm(*args)
        key = None
        if self.symbolic:
            mapping = _bindings(self.gm, args)
            key = tuple(sorted((str(k), v) for k, v in mapping.items()))
        variant = self.variants.get(key)
        if variant is None:
            variant = self._compile(key, args, first=False)
            if variant is None:
                return self.gm(*args)
        return variant.run(args)

    def _compile(self, key, args, first: bool):
        t0 = time.perf_counter()
        cache_hit = False
        try:
            concrete = _concrete(_bindings(self.gm, args) if self.symbolic else {})
            cache_key = (self.gm.code, _layout_key(args), key)
            cached = _cache.get(cache_key)
            desc = describe(self.gm, concrete)
            if cached is not None:
                handle, report = cached
                cache_hit = True
            else:
                handle = desc.builder.compile(self.name)
                report = handle.report()
                _cache[cache_key] = (handle, report)
            variant = Variant(self.gm, handle, report, desc)
        except Exception as e:  # noqa: BLE001 - any compiler failure falls back to eager kernels
            reason = f"{type(e).__name__}: {e}".splitlines()[0]
            if _strict():
                raise RuntimeError(
                    f"neuronsim.compile: graph {self.name} failed to compile ({reason}); "
                    "NEURON_SIM_STRICT=1 or TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=1 forbids "
                    "running it with eager kernels"
                ) from e
            warnings.warn(
                f"neuronsim.compile: graph {self.name} runs with eager kernels: {reason}",
                stacklevel=2,
            )
            self.fallback = reason
            if first or not self.symbolic:
                stats.record_graph(self._entry(time.perf_counter() - t0, None, reason))
            else:  # counted as a graph when it was first seen
                stats.record_fallback(self.name, reason)
            return None
        elapsed = time.perf_counter() - t0
        entry = self._entry(elapsed, report, None, cache_hit=cache_hit, key=key)
        if self.symbolic:
            stats.record_specialization(entry)
        else:
            stats.record_graph(entry)
        self.variants[key] = variant
        return variant

    def _entry(self, seconds, report, fallback, cache_hit=False, key=None, dynamic=False) -> dict:
        e = {
            "name": self.name,
            "kind": self.kind,
            "nodes": self.nodes,
            "compile_s": seconds,
            "fallback": fallback,
            "dynamic": dynamic or self.symbolic,
        }
        if key:
            e["shape"] = dict(key)
        if report is None:
            e.update(
                regions=0,
                fused_nodes=0,
                eager_nodes={},
                native_nodes={},
                host_nodes={},
                collective_nodes={},
                kernel_nodes={},
                launches=0,
                instructions=0,
                not_fused={},
                region_names=[],
            )
            return e
        buckets: dict = {"eager": {}, "native": {}, "host": {}, "collective": {}, "kernel": {}}
        not_fused: dict = {}
        fused = 0
        for n in report["nodes"]:
            if n["class"] == "fused":
                fused += 1
            elif n["class"] in buckets:
                # A functional collective ends a launch as a host node does, but it is an
                # operation of the collective stream, not host work (fx_graph.is_collective).
                collective = n["class"] == "host" and is_collective(n["op"])
                bucket = buckets["collective" if collective else n["class"]]
                bucket[n["op"]] = bucket.get(n["op"], 0) + 1
                reason = (
                    "a collective: runs on the collective stream between launches"
                    if collective
                    else n["reason"]
                )
                k = f"{n['op']}: {reason}"
                not_fused[k] = not_fused.get(k, 0) + 1
        e.update(
            regions=sum(
                1 for r in report["regions"] if r["kind"] in ("tile", "matmul", "attention")
            ),
            attention_regions=sum(1 for r in report["regions"] if r["kind"] == "attention"),
            fused_nodes=fused,
            kernel_nodes=buckets["kernel"],
            eager_nodes=buckets["eager"],
            native_nodes=buckets["native"],
            host_nodes=buckets["host"],
            collective_nodes=buckets["collective"],
            launches=sum(1 for seg in report["segments"] if seg["parts"]),
            instructions=report["instructions"],
            not_fused=not_fused,
            region_names=[r["name"] for r in report["regions"]],
            cache_hit=cache_hit,
        )
        return e


def _graph_compiler(kind: str):
    def compiler(gm: torch.fx.GraphModule, example_inputs):
        compiled = CompiledGraph(gm, example_inputs, kind)

        def run(args):
            return compiled(args)

        # AOT autograd calls boxed functions with the argument list (and may free it early).
        run._boxed_call = True
        run.compiled_graph = compiled
        return run

    return compiler


_aot_backend = None


# Composites the graph compiler lowers itself (kernels/graph/lower.cpp): left whole, the host
# computes each with one CPU kernel, as eager mode does, instead of its decomposition's passes.
_KEEP = (
    "gelu_backward",
    "_softmax_backward_data",
    "_log_softmax_backward_data",
    "embedding_dense_backward",
)


def decompositions():
    """Core ATen decompositions less the composites in _KEEP."""
    from torch._decomp import core_aten_decompositions

    table = core_aten_decompositions()
    for name in _KEEP:
        for overload in getattr(torch.ops.aten, name).overloads():
            table.pop(getattr(getattr(torch.ops.aten, name), overload), None)
    return table


def neuron_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """The dynamo backend ``neuron`` (also what plain ``torch.compile`` uses for neuron graphs)."""
    global _aot_backend  # noqa: PLW0603
    _note_recompilation()
    if _aot_backend is None:
        from torch._dynamo.backends.common import aot_autograd

        _aot_backend = aot_autograd(
            fw_compiler=_graph_compiler("forward"),
            bw_compiler=_graph_compiler("backward"),
            inference_compiler=_graph_compiler("inference"),
            decompositions=decompositions(),
            keep_inference_input_mutations=True,
        )
    rewrite_sdpa(gm)
    return _aot_backend(gm, example_inputs)


def _note_recompilation() -> None:
    try:
        from torch._guards import CompileContext

        cid = CompileContext.current_compile_id()
    except Exception:  # noqa: BLE001 - dynamo internals; counting is best effort
        return
    if cid is None or not getattr(cid, "frame_compile_id", 0):
        return
    reason = None
    try:
        from torch._dynamo.utils import get_metrics_context

        reason = getattr(get_metrics_context(), "_metrics", {}).get("recompile_reason")
    except Exception:  # noqa: BLE001
        pass
    stats.record_recompile(f"{cid}: {reason}" if reason else str(cid))
