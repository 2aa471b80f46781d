"""The report's sections as (headers, rows) built from a summary (trace_data.summarize): the text
report and the HTML page render the same rows."""

from __future__ import annotations

from neuronsim.cli import time_report
from neuronsim.cli.formatting import bytes_str, pct, rate_str, time_str


def _short(s: dict, name: str) -> str:
    """'nc0 TensorE' -> 'TensorE' when one core ran."""
    if len(s.get("active_cores", [])) <= 1 and " " in name:
        return name.split(" ", 1)[1]
    return name


def _of_window(s: dict, ns: float) -> str:
    window = s["time_account"]["window_ns"]
    return pct(ns / window) if window > 0 else "-"


def _of_peak(achieved: float, peak: float, unit: str) -> str:
    if peak <= 0:
        return f"{rate_str(achieved, unit)} (peak n/a)"
    return f"{rate_str(achieved, unit)} ({pct(achieved / peak)} of peak {rate_str(peak, unit)})"


def overrides_str(s: dict) -> str:
    o = s.get("overrides") or {}
    if isinstance(o, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(o.items())) or "none"
    return ", ".join(map(str, o)) or "none"


def summary_rows(s: dict) -> list[tuple[str, str]]:
    cores = ", ".join(s["active_cores"]) or "-"
    rows = [
        ("preset", f"{s['preset'] or '-'} (overrides: {overrides_str(s)})"),
        (
            "simulated time",
            f"{time_str(s['device_time_ns'])} device clock, "
            f"{time_str(s['host_time_ns'])} host clock",
        ),
        (
            "trace window",
            f"{time_str(s['window_begin_ns'])} .. {time_str(s['window_end_ns'])}"
            f" ({time_str(s['window_ns'])}), cores with work: {cores}",
        ),
        ("bottleneck", time_report.bottleneck_str(s["limit"], lambda n: _short(s, n))),
        ("TensorE FLOP/s", _of_peak(s["achieved_flops_per_s"], s["peak_flops_per_s"], "FLOP/s")),
        (
            "HBM bandwidth",
            _of_peak(s["achieved_hbm_bytes_per_s"], s["peak_hbm_bytes_per_s"], "B/s"),
        ),
        (
            "bytes moved",
            f"{bytes_str(s['dma_bytes'])} by DMA, {bytes_str(s['hbm_bytes'])} to/from HBM",
        ),
        ("ops", f"{s['native_calls']} native calls, {s['fallback_calls']} CPU fallback calls"),
    ]
    return rows


ENGINE_HEADERS = ("core", "engine", "instructions", "busy", "util")
ENGINE_NOTES = {
    "core": "the NeuronCore (logical core; pcore<N> rows are its physical cores)",
    "engine": "an engine, TensorE's LoadStationary unit, a DMA queue, or a core's queues together",
    "instructions": "instructions it ran",
    "busy": "the union of its instructions' time",
    "util": "busy time over the window (engines overlap: these do not add up)",
}
TIME_NOTES = {
    "part": "what the time went to; each instant belongs to the first part active then",
    "time": "the part's time not hidden under a part above it",
    "share": "time over the window: the shares add up to 100%",
    "in all": "the part's whole time, hidden or not",
    "note": "counts, and how much of the part ran under kernels",
}


def engine_rows(s: dict) -> list[tuple]:
    return [
        (
            e["process"],
            e["engine"],
            e["instructions"],
            time_str(e["busy_ns"]),
            pct(e["utilisation"]),
        )
        for e in s["engines"]
    ]


OP_HEADERS = ("op", "count", "device time", "% of window", "% of op time", "mean")
OP_NOTES = {
    "op": "an ATen op that launched device work (ops that launched none are left out)",
    "count": "calls with device work",
    "device time": "from the op's first kernel's start to its last kernel's end, per call, summed",
    "% of window": "device time over the run's simulated time (the window)",
    "% of op time": "device time over all ops' device time (nested ops counted once)",
    "mean": "device time per call",
}


def op_rows(s: dict, top: int | None) -> list[tuple]:
    return [
        (
            o["name"],
            o["count"],
            time_str(o["total_ns"]),
            _of_window(s, o["total_ns"]),
            f"{o['percent']:.1f}%",
            time_str(o["total_ns"] / o["count"]),
        )
        for o in s["ops"][:top]
    ]


def ops_left_out(s: dict) -> str:
    """The line saying which host ops launched nothing (not in the op table)."""
    o = s.get("ops_without_kernels") or {}
    if not o.get("calls"):
        return ""
    top = ", ".join(f"{n} x{c}" for n, c in o.get("top", [])[:5])
    return (
        f"{o['calls']} op calls launched no device work (views, metadata, host-only) and are "
        f"not listed: {top}"
    )


KERNEL_HEADERS = (
    "#",
    "kernel",
    "launches",
    "time",
    "% of window",
    "% of kernel time",
    "busiest engine",
    "instructions",
    "TensorE FLOP/s",
    "flop/HBM byte",
    "HBM bytes",
)
KERNEL_NOTES = {
    "#": "the kernel's number on the roofline",
    "kernel": "a program the kernel library built (or a fused program of a compiled graph)",
    "launches": "times it ran",
    "time": "its launches' simulated time, summed",
    "% of window": "time over the run's simulated time (the window)",
    "% of kernel time": "time over all kernels' time",
    "busiest engine": "the engine busy longest inside it, and its busy share of the kernel's time",
    "instructions": "instructions over all launches",
    "TensorE FLOP/s": "matmul FLOPs over the kernel's time",
    "flop/HBM byte": "matmul FLOPs per byte moved to or from HBM",
    "HBM bytes": "bytes its DMA moved to or from HBM",
}


def busiest_engine(k: dict) -> tuple[str, float]:
    """The engine busy longest inside a kernel and its share of the kernel's time."""
    busy = k.get("engine_busy_ns") or {}
    if not busy or k["total_ns"] <= 0:
        return "-", 0.0
    name = max(busy, key=lambda e: busy[e])
    return name, busy[name] / k["total_ns"]


def kernel_rows(s: dict, top: int | None) -> list[tuple]:
    rows = []
    for i, k in enumerate(s["kernels"][:top]):
        engine, share = busiest_engine(k)
        rows.append(
            (
                i + 1,
                k["name"],
                k["launches"],
                time_str(k["total_ns"]),
                _of_window(s, k["total_ns"]),
                f"{k['percent']:.1f}%",
                f"{engine} {pct(share)}" if engine != "-" else "-",
                k["instructions"],
                rate_str(k["achieved_flops_per_s"], "FLOP/s") if k["flops"] else "-",
                f"{k['intensity']:.1f}" if k["intensity"] else "-",
                bytes_str(k["hbm_bytes"]),
            )
        )
    return rows


OP_REPORT_HEADERS = ("op", "native", "CPU fallback", "computed at 32 bits")


def op_report_rows(s: dict) -> list[tuple]:
    rows = [
        (n, c.get("native", 0), c.get("fallback", 0), c.get("computed_at_32_bits", 0))
        for n, c in s["op_report"].items()
    ]
    rows.sort(key=lambda r: (-r[2], -r[1], r[0]))  # fallbacks first
    return rows


CONFIG_HEADERS = ("parameter", "value", "overridden")


def config_rows(s: dict) -> list[tuple]:
    o = s.get("overrides") or {}
    keys = set(o) if isinstance(o, dict) else {str(x).split("=", 1)[0] for x in o}
    return [(k, v, "yes" if k in keys else "") for k, v in sorted(s["config"].items())]


GRAPH_HEADERS = (
    "graph",
    "kind",
    "nodes",
    "fused regions",
    "launches/run",
    "eager",
    "host",
    "compile",
)


def compile_lines(s: dict) -> list[str]:
    """torch.compile on the device: what was compiled, recompiled, broken and not fused."""
    c = s.get("compile") or {}
    if not (c.get("graphs") or c.get("backward_graphs")):
        return []
    n_attention = c.get("attention_regions", 0)
    attention = f" ({n_attention} flash attention)" if n_attention else ""
    out = [
        f"{c.get('graphs', 0)} forward/inference and {c.get('backward_graphs', 0)} backward "
        f"graphs, {c.get('nodes', 0)} nodes: {c.get('fused_nodes', 0)} fused into "
        f"{c.get('fused_regions', 0)} regions{attention}, {c.get('native_nodes', 0)} "
        "data-dependent "
        f"device kernels and {c.get('eager_nodes', 0)} eager kernels inside launches, "
        f"{c.get('host_nodes', 0)} on the host, {c.get('collective_nodes', 0)} collectives "
        f"between launches; compile time "
        f"{c.get('compile_time_s', 0.0):.2f} s, {c.get('cache_hits', 0)} cache hits, "
        f"{c.get('shape_specializations', 0)} shape specialisations, "
        f"{c.get('fallback_graphs', 0)} graphs on eager kernels",
        f"recompilations: {c.get('recompilations', 0)}",
    ]
    out += [f"  {r}" for r in c.get("recompile_reasons", [])[:10]]
    out.append(f"graph breaks: {c.get('graph_breaks', 0)}")
    out += [f"  {n} x {r}" for r, n in list(c.get("graph_break_reasons", {}).items())[:10]]
    if c.get("fallback_reasons"):
        out.append("graphs run with eager kernels:")
        out += [f"  {r}" for r in c["fallback_reasons"][:10]]
    if c.get("not_fused"):
        out.append("not fused (nodes):")
        out += [f"  {n} x {r}" for r, n in list(c["not_fused"].items())[:10]]
    return out


def graph_rows(s: dict) -> list[tuple]:
    return [
        (
            g.get("name", ""),
            g.get("kind", ""),
            g.get("nodes", 0),
            g.get("regions", 0),
            g.get("launches", 0),
            sum((g.get("eager_nodes") or {}).values()),
            sum((g.get("host_nodes") or {}).values()),
            f"{1000 * g.get('compile_s', 0.0):.0f} ms",
        )
        for g in (s.get("compile") or {}).get("per_graph", [])
    ]


LAUNCH_HEADERS = ("compiled graph launch", "launches", "time", "instructions", "HBM bytes")


def launch_rows(s: dict) -> list[tuple]:
    """The launches of compiled graphs: one program each, holding the graph's fused programs."""
    return [
        (
            g["name"],
            g["launches"],
            time_str(g["total_ns"]),
            g["instructions"],
            bytes_str(g["hbm_bytes"]),
        )
        for g in s.get("graph_launches", [])
    ]


def fused_program_lines(s: dict, top: int | None, width: int = 100) -> list[str]:
    """The FX nodes each fused program among the top kernels contains."""
    out = []
    for k in s["kernels"][:top]:
        nodes = k.get("fused_nodes")
        if nodes:
            line = f"  {k['name']}: {nodes}"
            out.append(line if len(line) <= width else line[: width - 3] + "...")
    return out
