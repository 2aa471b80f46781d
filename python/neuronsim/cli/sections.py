"""The report's sections as (headers, rows) built from a summary (trace_data.summarize): the text
report and the HTML page render the same rows."""

from __future__ import annotations

from neuronsim.cli.formatting import bytes_str, pct, rate_str, time_str


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
        ("bottleneck", f"{s['bottleneck'] or '-'} ({pct(s['bottleneck_utilisation'])} busy)"),
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


OP_HEADERS = ("op", "count", "device time", "% of op time", "mean")


def op_rows(s: dict, top: int | None) -> list[tuple]:
    return [
        (
            o["name"],
            o["count"],
            time_str(o["total_ns"]),
            f"{o['percent']:.1f}%",
            time_str(o["total_ns"] / o["count"]),
        )
        for o in s["ops"][:top]
    ]


KERNEL_HEADERS = (
    "kernel",
    "launches",
    "time",
    "% of kernel time",
    "instructions",
    "TensorE FLOP/s",
    "flop/HBM byte",
    "HBM bytes",
)


def kernel_rows(s: dict, top: int | None) -> list[tuple]:
    return [
        (
            k["name"],
            k["launches"],
            time_str(k["total_ns"]),
            f"{k['percent']:.1f}%",
            k["instructions"],
            rate_str(k["achieved_flops_per_s"], "FLOP/s") if k["flops"] else "-",
            f"{k['intensity']:.1f}" if k["intensity"] else "-",
            bytes_str(k["hbm_bytes"]),
        )
        for k in s["kernels"][:top]
    ]


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
