"""``neuronsim nki``: NKI kernels on the simulated NeuronCore.

``neuronsim nki bench kernel.py::fn --shapes 8192x4096:bf16,8192x8192:bf16`` runs the kernel's
benchmark the way ``nki.benchmark`` / ``neuron-profile`` would on a Trainium instance: timing
only, on placeholder inputs of those shapes; it prints the latency, the hardware FLOPs
utilisation, each engine's busy time and, with ``--lines``, where the time went per source line.
``neuronsim nki lines trace.json`` prints the per-line table of a recorded trace.
"""

from __future__ import annotations

import json
import os
import sys

from neuronsim.cli.common import add_config_options, configure
from neuronsim.cli.errors import CLIError

_DTYPES = {
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp32": "float32",
    "float32": "float32",
    "f32": "float32",
    "fp16": "float16",
    "float16": "float16",
    "f16": "float16",
    "fp8_e4m3": "float8_e4m3",
    "fp8_e5m2": "float8_e5m2",
    "int32": "int32",
    "int8": "int8",
    "int16": "int16",
    "uint8": "uint8",
}

_EXAMPLES = """\
examples:
  neuronsim nki bench matmul.py::nki_matmul --shapes 128x512:bf16,128x512:bf16
  neuronsim nki bench kernel.py::fn --shapes 4096x512:fp32 --lines --trace out.json
  neuronsim nki bench kernel.py::fn --shapes 4096x512:fp32 --preset trn2
  neuronsim nki lines out.json --top 10"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "nki",
        help="benchmark NKI kernels on the simulated NeuronCore",
        description=__doc__.split("\n\n")[0],
        epilog=_EXAMPLES,
    )
    nsub = p.add_subparsers(dest="nki_command", metavar="{bench,lines}")
    nsub.required = True
    b = nsub.add_parser(
        "bench", help="time a kernel on placeholder inputs (timing only)", epilog=_EXAMPLES
    )
    b.add_argument("target", metavar="FILE.py::KERNEL", help="the kernel: a file and a function")
    b.add_argument(
        "--shapes",
        required=True,
        metavar="SHAPE:DTYPE,...",
        help="one per tensor argument, e.g. 8192x4096:bf16,8192x8192:bf16",
    )
    b.add_argument(
        "--kwarg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a non-tensor keyword argument (Python literal), repeatable",
    )
    b.add_argument("--grid", metavar="N[,M]", help="SPMD grid (kernel[N, M])")
    b.add_argument("--lines", action="store_true", help="per source line: busy time on each engine")
    b.add_argument("--trace", metavar="OUT.json", help="write the Perfetto trace")
    b.add_argument("--json", action="store_true", help="print the result as JSON")
    add_config_options(b)
    b.set_defaults(func=run_bench)
    lines = nsub.add_parser(
        "lines", help="per source line time of an NKI kernel trace", epilog=_EXAMPLES
    )
    lines.add_argument("trace", help="a trace written with --trace or neuronsim run --trace")
    lines.add_argument("--top", type=int, default=20, help="lines to show (default 20)")
    lines.set_defaults(func=run_lines)


def parse_shapes(text: str):
    out = []
    for item in text.split(","):
        item = item.strip()
        shape, sep, dtype = item.partition(":")
        try:
            dims = tuple(int(x) for x in shape.lower().split("x"))
        except ValueError:
            raise CLIError(f"malformed shape '{item}': expected e.g. 8192x4096:bf16") from None
        dt = _DTYPES.get((dtype or "fp32").strip().lower())
        if dt is None or any(d <= 0 for d in dims):
            raise CLIError(f"malformed shape '{item}': dtype one of {', '.join(sorted(_DTYPES))}")
        out.append((dims, dt))
    return out


def load_kernel(target: str):
    path, sep, name = target.rpartition("::")
    if not sep or not path or not name:
        raise CLIError(f"malformed kernel '{target}': expected FILE.py::FUNCTION")
    if not os.path.isfile(path):
        raise CLIError(f"{path}: no such file")
    import importlib.util

    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the user's file
        raise CLIError(f"{path}: {type(e).__name__}: {e}") from None
    fn = getattr(module, name, None)
    if fn is None:
        raise CLIError(f"{path} has no {name}")
    return fn


def run_bench(args) -> int:
    import ast

    config = configure(args.preset, args.set)
    from neuronsim.nki import _jit
    from neuronsim.nki._dtypes import as_dtype
    from neuronsim.nki.errors import NkiError
    from neuronsim.nki.legacy import language as nl  # noqa: F401 - dtype names

    shapes = parse_shapes(args.shapes)
    fn = load_kernel(args.target)
    kernel = fn.kernel if isinstance(fn, _jit.Benchmarked) else fn
    if not isinstance(kernel, _jit.Kernel):
        kernel = _jit.Kernel(kernel, "legacy")
    if args.grid:
        try:
            kernel = kernel[tuple(int(g) for g in args.grid.split(","))]
        except ValueError:
            raise CLIError(f"malformed --grid '{args.grid}'") from None
    kwargs = {}
    for item in args.kwarg:
        k, sep, v = item.partition("=")
        if not sep:
            raise CLIError(f"malformed --kwarg '{item}': expected NAME=VALUE")
        try:
            kwargs[k] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            kwargs[k] = v
    placeholders = [_jit.Placeholder(s, as_dtype(getattr(nl, d))) for s, d in shapes]
    from neuronsim.nki import _profile

    try:
        with _profile.maybe_trace(args.trace):
            _, info = _jit.run(kernel, placeholders, kwargs, full=False, line_stats=args.lines)
    except NkiError as e:
        raise CLIError(str(e)) from None
    result = {
        "kernel": kernel.fn.__name__,
        "preset": config["preset"],
        "overrides": config["overrides"],
        "latency_us": info.latency_us,
        "hfu": info.hfu,
        "mfu": info.mfu,
        "tensor_flops": info.tensor_flops,
        "instructions": info.instructions,
        "semaphore_waits": info.semaphore_waits,
        "sbuf_peak_bytes": info.sbuf_peak_bytes,
        "psum_peak_bytes": info.psum_peak_bytes,
        "engines": info.engines,
        "host_seconds": {
            "trace": info.trace_seconds,
            "lower": info.build_seconds + info.convert_seconds + info.lower_seconds,
            "simulate": info.run_seconds,
        },
    }
    if args.lines:
        result["lines"] = info.lines
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(format_bench(result))
    if args.trace:
        print(f"trace written to {args.trace}")
    return 0


def _us(x: float) -> str:
    if x >= 1000:
        return f"{x / 1000:.3f} ms"
    return f"{x:.3f} us"


def format_bench(r: dict) -> str:
    out = [
        f"kernel        {r['kernel']} on {r['preset']}"
        + (f" ({', '.join(r['overrides'])})" if r["overrides"] else "")
        + ", timing only",
        f"latency       {_us(r['latency_us'])} (every percentile: the simulation is "
        "deterministic)",
        f"HFU / MFU     {100 * r['hfu']:.2f}% / {100 * r['mfu']:.2f}% "
        f"({r['tensor_flops'] / 1e9:.1f} GFLOP on TensorE, transposes included in HFU)",
        f"instructions  {r['instructions']} ({r['semaphore_waits']} semaphore waits)",
        f"on chip       SBUF {r['sbuf_peak_bytes']} B/partition, PSUM "
        f"{r['psum_peak_bytes']} B/partition at most",
        f"host time     trace {r['host_seconds']['trace']:.3f} s, lower "
        f"{r['host_seconds']['lower']:.3f} s, simulate {r['host_seconds']['simulate']:.3f} s",
        "",
        f"{'engine':<22}{'busy':>14}{'util':>8}",
    ]
    lat = r["latency_us"] or 1.0
    for name, busy in sorted(r["engines"].items(), key=lambda kv: -kv[1]):
        util = "" if "summed" in name else f"{100 * busy / lat:>7.1f}%"
        out.append(f"{name:<22}{_us(busy):>14}{util:>8}")
    if r.get("lines"):
        out.append("")
        out.append(format_lines(r["lines"], 20))
    return "\n".join(out)


def merge_dma_queues(lines: list) -> list:
    """One row per line for all its DMA queues ("DMA q3" -> "DMA", busy times summed)."""
    acc: dict = {}
    for x in lines:
        eng = x["engine"]
        head, sep, q = eng.rpartition("DMA q")
        if sep and q.isdigit():
            eng = head + "DMA (queues)"
        a = acc.setdefault((x["src"], eng), [0, 0.0])
        a[0] += x["instructions"]
        a[1] += x["busy_us"]
    return [
        {"src": s, "engine": e, "instructions": n, "busy_us": b} for (s, e), (n, b) in acc.items()
    ]


def format_lines(lines: list, top: int) -> str:
    """[{"src", "engine", "busy_us", "instructions"}] as a table, busiest first (DMA queues
    summed per line)."""
    rows = sorted(merge_dma_queues(lines), key=lambda x: -x["busy_us"])[:top]
    out = [f"{'source line':<44}{'engine':<18}{'instr':>8}{'busy':>14}"]
    for x in rows:
        out.append(
            f"{x['src']:<44}{x['engine']:<18}{x['instructions']:>8}" f"{_us(x['busy_us']):>14}"
        )
    return "\n".join(out)


def lines_from_trace(path: str) -> list:
    """Per (source line, engine row): instructions and busy time, from a trace's slices."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise CLIError(f"{path}: no such file") from None
    except (OSError, ValueError) as e:
        raise CLIError(f"{path}: not a trace ({e})") from None
    events = doc.get("traceEvents", doc) if isinstance(doc, dict) else doc
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e.get("pid"), e.get("tid"))] = e.get("args", {}).get("name", "")
    acc: dict = {}
    for e in events:
        if e.get("ph") != "X":
            continue
        src = (e.get("args") or {}).get("src")
        if not src:
            continue
        key = (src, names.get((e.get("pid"), e.get("tid")), str(e.get("tid"))))
        a = acc.setdefault(key, [0, 0.0])
        a[0] += 1
        a[1] += float(e.get("dur", 0.0))
    return [
        {"src": s, "engine": eng, "instructions": n, "busy_us": us}
        for (s, eng), (n, us) in acc.items()
    ]


def run_lines(args) -> int:
    lines = lines_from_trace(args.trace)
    if not lines:
        raise CLIError(
            f"{args.trace}: no instruction carries a source line (not an NKI kernel " "trace)"
        )
    print(format_lines(lines, args.top))
    return 0
