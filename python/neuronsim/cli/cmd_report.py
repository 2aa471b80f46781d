"""``neuronsim report``: where the simulated time of one trace went (kernels, launch overhead,
copies, CPU fallbacks, collectives: parts that add up to the run), engines, top ops and kernels,
FLOP/s and bytes/s against the preset's peaks, a roofline plot and the native/fallback op counts.
"""

from __future__ import annotations

import json
import sys

from neuronsim.cli import ranks, sections, time_report, trace_data
from neuronsim.cli.errors import CLIError, write_file
from neuronsim.cli.formatting import table

EXAMPLES = """\
examples:
  neuronsim report out.json                       the whole report as text
  neuronsim report out.json --html report.html    the page (timeline, roofline); prints a short
                                                  summary, --text for the whole report too
  neuronsim report out.json --roofline roof.png --top 5
  neuronsim report ddp.json --rank 1              one rank of a merged distributed trace"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "report",
        help="where the time went, engines, ops and kernels of a trace",
        description=__doc__.split("``: ")[1],
        epilog=EXAMPLES,
    )
    p.add_argument("trace", help="trace from `neuronsim run --trace` (or neuronsim.tracing)")
    p.add_argument("--html", metavar="OUT.html", help="write a self-contained HTML page")
    p.add_argument("--roofline", metavar="OUT.png", help="write the roofline plot")
    p.add_argument(
        "--text",
        action="store_true",
        help="print the whole text report even when --html or --roofline writes a file",
    )
    p.add_argument(
        "--top", type=int, default=10, metavar="N", help="ops and kernels shown (default 10)"
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of text")
    p.add_argument(
        "--rank",
        type=int,
        default=0,
        metavar="R",
        help="of a merged distributed trace: the rank whose engines, ops and kernels are shown "
        "(every rank's compute, communication and waiting are always shown; default 0)",
    )
    p.set_defaults(func=run)


def _legend(notes: dict) -> list[str]:
    width = max(len(k) for k in notes)
    return [f"  {k.ljust(width)}  {v}" for k, v in notes.items()]


def time_text(s: dict) -> list[str]:
    rep = time_report.from_summary(s)
    return [
        f"Where the time went ({s['time_account']['window_ns'] / 1e3:.3f} us window)",
        table(time_report.TIME_HEADERS, time_report.rows(rep), (False, True, True, True, False)),
        f"engines busy (of the window; they overlap): {time_report.engines_line(rep)}",
    ]


def short_text(s: dict) -> str:
    """What `report --html/--roofline` prints: the summary and where the time went."""
    width = max(len(k) for k, _ in sections.summary_rows(s))
    out = [f"{k.ljust(width)}  {v}" for k, v in sections.summary_rows(s)]
    return "\n".join([*out, "", *time_text(s)])


def text(s: dict, top: int | None) -> str:
    out = [short_text(s)]
    out += [
        "",
        "Engines",
        table(sections.ENGINE_HEADERS, sections.engine_rows(s), (False, False, True, True, True)),
    ]
    out += [
        "",
        f"Top ops by device time ({min(top or len(s['ops']), len(s['ops']))} of {len(s['ops'])})",
        table(sections.OP_HEADERS, sections.op_rows(s, top)),
    ]
    left_out = sections.ops_left_out(s)
    if left_out:
        out.append(left_out)
    out += [
        "",
        f"Top kernels by simulated time ({min(top or len(s['kernels']), len(s['kernels']))} "
        f"of {len(s['kernels'])})",
        table(sections.KERNEL_HEADERS, sections.kernel_rows(s, top)),
    ]
    fused = sections.fused_program_lines(s, top)
    if fused:
        out += ["fused programs (FX nodes):", *fused]
    compiled = sections.compile_lines(s)
    if compiled:
        out += [
            "",
            "torch.compile",
            *compiled,
            table(sections.GRAPH_HEADERS, sections.graph_rows(s)),
        ]
    if s.get("graph_launches"):
        out += ["", table(sections.LAUNCH_HEADERS, sections.launch_rows(s))]
    fallbacks = [r for r in sections.op_report_rows(s) if r[2]]
    out += [
        "",
        f"Native and fallback ops: {len(s['op_report'])} ops, {s['native_calls']} native calls, "
        f"{s['fallback_calls']} CPU fallback calls",
    ]
    if fallbacks:
        out.append(table(sections.OP_REPORT_HEADERS, fallbacks))
    if s["instructions_outside_kernels"]:
        out += [
            "",
            f"warning: {s['instructions_outside_kernels']} instructions lie outside every "
            "kernel slice",
        ]
    out += ["", "Columns"]
    for title, notes in (
        ("where the time went", sections.TIME_NOTES),
        ("engines", sections.ENGINE_NOTES),
        ("ops", sections.OP_NOTES),
        ("kernels", sections.KERNEL_NOTES),
    ):
        out += [f" {title}:", *_legend(notes)]
    return "\n".join(out)


def run(args) -> int:
    if args.top is not None and args.top < 1:
        raise CLIError(f"--top must be at least 1, got {args.top}")
    trace = trace_data.load(args.trace)
    per_rank = None
    if ranks.is_merged(trace):
        files = ranks.rank_files(trace)
        if not 0 <= args.rank < len(files):
            raise CLIError(f"--rank {args.rank}: the trace has ranks 0-{len(files) - 1}")
        per_rank = ranks.breakdown(files)
        trace = trace_data.load(files[args.rank])
    s = trace_data.summarize(trace)
    if per_rank is not None:
        s["ranks"] = per_rank
    written = []
    if args.roofline:
        from neuronsim.cli import plots

        write_file(args.roofline, plots.roofline_png(s))
        written.append(f"neuronsim: roofline written to {args.roofline}")
    if args.html:
        from neuronsim.cli import html_report

        html_report.write(args.html, s, top=args.top)
        written.append(f"neuronsim: HTML report written to {args.html}")
    if args.json:
        print(json.dumps(s, indent=1, sort_keys=True))
    else:
        if per_rank is not None:
            print(
                f"Ranks ({len(per_rank)}): compute, communication and waiting for other ranks "
                "(with launch overhead and the rest, they add up to each rank's time)"
            )
            print(ranks.format_breakdown(per_rank))
            print(f"\nRank {args.rank}")
        print(text(s, args.top) if args.text or not written else short_text(s))
    for line in written:
        print(line, file=sys.stderr)
    return 0
