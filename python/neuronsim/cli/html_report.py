"""The self-contained HTML report (plots embedded as base64 PNG)."""

from __future__ import annotations

import base64
import html

from neuronsim.cli import plots, sections
from neuronsim.cli.errors import write_file

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
tr.hl td { background: #fff4d6; } code { background: #f4f4f4; padding: 0 0.2em; }
"""


def _table(headers, rows, highlight=None) -> str:
    out = ["<table>"]
    if any(headers):
        out.append("<tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in headers) + "</tr>")
    for r in rows:
        cls = ' class="hl"' if highlight and highlight(r) else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>")
    return "\n".join(out) + "</table>"


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def render(s: dict, top: int | None = 20) -> str:
    points, skipped = plots.roofline_points(s)
    title = f"neuronsim report: {s.get('script') or s.get('trace') or ''}"
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
    ]
    parts += ["<h2 id='summary'>Summary</h2>", _table(("", ""), sections.summary_rows(s))]
    parts += [
        "<h2 id='engines'>Engines</h2>",
        "<p>Busy time is the union of an engine's instruction slices; utilisation is busy "
        "time over the trace window. The bottleneck is the busiest compute engine or a "
        "core's DMA queues together.</p>",
        _table(
            sections.ENGINE_HEADERS,
            sections.engine_rows(s),
            lambda r: f"{r[0]} {r[1]}" == s["bottleneck"],
        ),
    ]
    parts += [
        "<h2 id='top-ops'>Top ops</h2><p>Device spans of each ATen op on the cores "
        "(<code>Ops</code> rows).</p>",
        _table(sections.OP_HEADERS, sections.op_rows(s, top)),
    ]
    parts += [
        "<h2 id='top-kernels'>Top kernels</h2>",
        _table(sections.KERNEL_HEADERS, sections.kernel_rows(s, top)),
    ]
    parts += [
        "<h2 id='roofline'>Roofline</h2>",
        f"<p>One point per kernel with TensorE FLOPs ({len(points)} shown"
        + (f"; not shown: {html.escape(', '.join(skipped))}" if skipped else "")
        + ").</p>",
        _img(plots.roofline_png(s), "roofline"),
    ]
    compiled = sections.compile_lines(s)
    if compiled:
        parts += [
            "<h2 id='compile'>torch.compile</h2>",
            "<pre>" + html.escape("\n".join(compiled)) + "</pre>",
            _table(sections.GRAPH_HEADERS, sections.graph_rows(s)),
            _table(sections.LAUNCH_HEADERS, sections.launch_rows(s)),
            "<pre>" + html.escape("\n".join(sections.fused_program_lines(s, top))) + "</pre>",
        ]
    parts += [
        "<h2 id='ops'>Native and fallback ops</h2>",
        f"<p>{s['native_calls']} native calls, {s['fallback_calls']} CPU fallback calls.</p>",
        _table(sections.OP_REPORT_HEADERS, sections.op_report_rows(s), lambda r: r[2] > 0),
    ]
    parts += [
        "<h2 id='configuration'>Configuration</h2>",
        f"<p>Preset <code>{html.escape(str(s['preset']))}</code>, overrides: "
        f"{html.escape(sections.overrides_str(s))}.</p>",
        _table(sections.CONFIG_HEADERS, sections.config_rows(s), lambda r: r[2] == "yes"),
    ]
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write(path: str, s: dict, top: int | None = 20) -> None:
    write_file(path, render(s, top))
