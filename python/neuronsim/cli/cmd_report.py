"""``neuronsim report``: engines, top ops and kernels, FLOP/s and bytes/s against the preset's
peaks, a roofline plot and the native/fallback op counts of one trace."""

from __future__ import annotations

import json

from neuronsim.cli import ranks, sections, trace_data
from neuronsim.cli.errors import CLIError, write_file
from neuronsim.cli.formatting import table


def add_parser(sub) -> None:
    p = sub.add_parser(
        "report", help="profile report of a trace", description=__doc__.split("``: ")[1]
    )
    p.add_argument("trace", help="trace from `neuronsim run --trace` (or neuronsim.tracing)")
    p.add_argument("--html", metavar="OUT.html", help="also write a self-contained HTML page")
    p.add_argument("--roofline", metavar="OUT.png", help="also write the roofline plot")
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


def text(s: dict, top: int | None) -> str:
    width = max(len(k) for k, _ in sections.summary_rows(s))
    out = [f"{k.ljust(width)}  {v}" for k, v in sections.summary_rows(s)]
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
    if args.roofline:
        from neuronsim.cli import plots

        write_file(args.roofline, plots.roofline_png(s))
    if args.html:
        from neuronsim.cli import html_report

        html_report.write(args.html, s, top=args.top)
    if args.json:
        print(json.dumps(s, indent=1, sort_keys=True))
    else:
        if per_rank is not None:
            print(f"Ranks ({len(per_rank)}): compute, communication and waiting for other ranks")
            print(ranks.format_breakdown(per_rank))
            print(f"\nRank {args.rank}")
        print(text(s, args.top))
    return 0
