"""What torch.compile did on the neuron device: graphs, recompilations and graph breaks with their
reasons, compile time, what was fused and what was not (and why)."""

from __future__ import annotations

from collections import Counter

_counts = {
    "graphs": 0,  # forward and inference graphs compiled
    "backward_graphs": 0,
    "nodes": 0,  # ATen call nodes in them
    "fused_regions": 0,
    "fused_nodes": 0,
    "attention_regions": 0,  # of the fused regions: flash attention programs
    # no fused rule: their op-library program, built at compile time, inside the graph's launch
    "kernel_nodes": 0,
    "eager_nodes": 0,  # run with the eager backend's kernel inside the graph's launch
    # data-dependent ops (embedding backward, gather, scatter, index_*): their device kernel,
    # its DMA descriptors from the indices, inside the launch
    "native_nodes": 0,
    "host_nodes": 0,  # run on the host CPU between launches
    "collective_nodes": 0,  # functional collectives and their waits, between launches
    "launches_per_run": 0,  # summed over graphs: one per segment
    "recompilations": 0,
    "shape_specializations": 0,  # a graph with dynamic dims compiled for one more shape
    "cache_hits": 0,  # an identical graph compiled before was reused
    "fallback_graphs": 0,  # graphs the compiler gave up on: eager kernels run them
    "compile_time_s": 0.0,
}
_graphs: list[dict] = []
_recompile_reasons: list[str] = []
_fallback_reasons: list[str] = []
_not_fused: Counter = Counter()  # "aten::op: reason" -> nodes


def record_graph(entry: dict) -> None:
    _graphs.append(entry)
    _counts["backward_graphs" if entry["kind"] == "backward" else "graphs"] += 1
    _counts["nodes"] += entry["nodes"]
    _counts["compile_time_s"] += entry["compile_s"]
    if entry.get("fallback"):
        _counts["fallback_graphs"] += 1
        _fallback_reasons.append(f"{entry['name']}: {entry['fallback']}")
        return
    _counts["fused_regions"] += entry["regions"]
    _counts["fused_nodes"] += entry["fused_nodes"]
    _counts["attention_regions"] += entry.get("attention_regions", 0)
    _counts["kernel_nodes"] += sum(entry.get("kernel_nodes", {}).values())
    _counts["eager_nodes"] += sum(entry["eager_nodes"].values())
    _counts["native_nodes"] += sum(entry.get("native_nodes", {}).values())
    _counts["host_nodes"] += sum(entry["host_nodes"].values())
    _counts["collective_nodes"] += sum(entry.get("collective_nodes", {}).values())
    _counts["launches_per_run"] += entry["launches"]
    if entry.get("cache_hit"):
        _counts["cache_hits"] += 1
    for key, n in entry["not_fused"].items():
        _not_fused[key] += n


def record_fallback(name: str, reason: str) -> None:
    """A graph with dynamic dimensions that could not be compiled for the shape it ran with."""
    _counts["fallback_graphs"] += 1
    _fallback_reasons.append(f"{name}: {reason}")


def record_recompile(reason: str | None) -> None:
    _counts["recompilations"] += 1
    _recompile_reasons.append(reason or "unknown")


def record_specialization(entry: dict) -> None:
    _counts["shape_specializations"] += 1
    _counts["compile_time_s"] += entry["compile_s"]
    _graphs.append(entry)


def _graph_breaks() -> tuple[int, dict[str, int]]:
    import sys

    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return 0, {}
    breaks = utils.counters.get("graph_break", Counter())
    reasons: dict[str, int] = {}
    for reason, n in breaks.items():
        first = str(reason).strip().splitlines()[0] if str(reason).strip() else "unknown"
        reasons[first] = reasons.get(first, 0) + n
    return sum(breaks.values()), reasons


def compile_stats() -> dict:
    """Counts (numbers) and their explanations (lists and dicts) since the process started;
    graph breaks are dynamo's count in this process (``torch._dynamo.utils.counters``, which
    ``torch._dynamo.reset()`` leaves alone)."""
    out: dict = dict(_counts)
    out["graph_breaks"], out["graph_break_reasons"] = _graph_breaks()
    out["recompile_reasons"] = list(_recompile_reasons)
    out["fallback_reasons"] = list(_fallback_reasons)
    out["not_fused"] = dict(_not_fused.most_common())
    out["per_graph"] = [dict(g) for g in _graphs]
    return out
