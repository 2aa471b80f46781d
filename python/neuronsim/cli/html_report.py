"""The self-contained HTML report (plots embedded as base64 PNG)."""

from __future__ import annotations

import base64
import html

from neuronsim.cli import plots, ranks, sections, time_report
from neuronsim.cli.errors import write_file

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
tr.hl td { background: #fff4d6; } code { background: #f4f4f4; padding: 0 0.2em; }
ul.legend { font-size: 0.85em; color: #444; margin-top: -1em; } img { max-width: 100%; }
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


def _legend(notes: dict) -> str:
    items = "".join(f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in notes.items())
    return f"<ul class='legend'>{items}</ul>"


def render(s: dict, top: int | None = 20) -> str:
    points, skipped = plots.roofline_points(s)
    title = f"neuronsim report: {s.get('script') or s.get('trace') or ''}"
    rep = time_report.from_summary(s)
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
    ]
    parts += ["<h2 id='summary'>Summary</h2>", _table(("", ""), sections.summary_rows(s))]
    if s.get("ranks"):
        parts += [
            "<h2 id='ranks'>Ranks</h2><p>Each rank's time: compute, communication not hidden "
            "under compute, waiting for other ranks, launch overhead and the rest add up to it."
            "</p>",
            "<pre>" + html.escape(ranks.format_breakdown(s["ranks"])) + "</pre>",
        ]
    parts += [
        "<h2 id='time'>Where the time went</h2>",
        "<p>The run's simulated time (the window) split into parts that add up to it: each "
        "instant belongs to the first part active then, so launch overhead or a copy that runs "
        "under a kernel costs nothing here (its whole time is in the <i>in all</i> column). "
        f"Bottleneck: <b>{html.escape(time_report.bottleneck_str(rep['limit']))}</b>.</p>",
        _table(time_report.TIME_HEADERS, time_report.rows(rep), lambda r: r[0].startswith("total")),
        f"<p>Engines busy (of the window; they overlap): "
        f"{html.escape(time_report.engines_line(rep))}.</p>",
        _legend(sections.TIME_NOTES),
        "<h3 id='timeline'>Timeline</h3>",
        "<p>Each engine's busy fraction over time; the rows below the line show when the device "
        "idled and why (launch overhead, copies, CPU fallbacks, collectives). Phases such as "
        "forward, backward and the optimizer show as stretches of different engine mixes.</p>",
        _img(plots.timeline_png(s), "timeline"),
    ]
    parts += [
        "<h2 id='engines'>Engines</h2>",
        "<p>The bottleneck row is highlighted when an engine limits the run.</p>",
        _table(
            sections.ENGINE_HEADERS,
            sections.engine_rows(s),
            lambda r: f"{r[0]} {r[1]}" == s["limit"]["name"],
        ),
        _legend(sections.ENGINE_NOTES),
    ]
    left_out = sections.ops_left_out(s)
    parts += [
        "<h2 id='top-ops'>Top ops</h2><p>Device spans of each ATen op on the cores "
        "(<code>Ops</code> rows).</p>",
        _table(sections.OP_HEADERS, sections.op_rows(s, top)),
        f"<p>{html.escape(left_out)}</p>" if left_out else "",
        _legend(sections.OP_NOTES),
    ]
    parts += [
        "<h2 id='top-kernels'>Top kernels</h2>",
        _table(sections.KERNEL_HEADERS, sections.kernel_rows(s, top)),
        _legend(sections.KERNEL_NOTES),
    ]
    parts += [
        "<h2 id='roofline'>Roofline</h2>",
        f"<p>Every kernel ({len(points)} shown"
        + (f"; no engine work: {html.escape(', '.join(skipped))}" if skipped else "")
        + ") against the roof of the engine busy longest inside it: x is that engine's busy "
        "time over the time the kernel's HBM traffic takes at peak bandwidth (left of 1: "
        "memory-bound side), y its busy share of the kernel's time; no kernel can sit above "
        "min(1, x). Numbers are the kernel table's #.</p>",
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
