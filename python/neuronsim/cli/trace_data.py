"""Reading neuronsim traces and summarising them: the one place `report`, `diff`, `run` and
`whatif` get their numbers from.

A trace is the Chrome trace-event JSON written by ``neuronsim.tracing`` (see
runtime/src/trace_session.cpp and traces/src/chrome_json_sink.cpp): slices ("X" events,
timestamps in microseconds with 6 decimals, i.e. exact picoseconds) on named rows of named
processes, counters ("C" events), and the run's metadata in the top-level ``otherData``.

The engine figures follow the C++ summary (traces/src/summary.cpp, ``ncsim trace summary``)
definition for definition, so both tools print the same numbers for the same trace:
- the window is the first slice's start to the last slice's end, over every row;
- an engine's busy time is the union of its slices; utilisation = busy / window;
- "DMA (all queues)" is the union over a core's DMA queues;
- the bottleneck is the busiest compute engine or a core's DMA queues taken together;
- FLOPs come from the instructions' ``flops`` args, bytes from the DMA queues' ``bytes`` and
  ``hbm_bytes``; the peaks scale with the cores that ran instructions (HBM: with the stacks
  those cores sit on).
"""

from __future__ import annotations

import bisect
import json
import math
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from neuronsim.cli.errors import CLIError

COMPUTE_ENGINES = ("TensorE", "VectorE", "ScalarE", "GpSimdE")
LOAD_STATIONARY = "TensorE (LoadStationary)"
ALL_DMA = "DMA (all queues)"
SUMMARY_FORMAT = "neuronsim-summary/1"


def is_dma_queue(row: str) -> bool:
    return row.startswith("DMA q")


def is_instruction_row(row: str) -> bool:
    """Rows holding instructions of a core's kernels (not Host DMA, which belongs to no kernel)."""
    return row in COMPUTE_ENGINES or row == LOAD_STATIONARY or is_dma_queue(row)


def engine_sort_key(engine: str) -> tuple:
    """TensorE, its LoadStationary row, VectorE, ScalarE, GpSimdE, all DMA, DMA q0, q1, ..."""
    order = [*COMPUTE_ENGINES[:1], LOAD_STATIONARY, *COMPUTE_ENGINES[1:], ALL_DMA]
    if engine in order:
        return (order.index(engine), 0)
    if is_dma_queue(engine) and engine[5:].isdigit():
        return (len(order), int(engine[5:]))
    return (len(order) + 1, engine)


@dataclass(slots=True)
class Slice:
    process: str
    row: str
    name: str
    begin: int  # picoseconds
    end: int
    args: dict


@dataclass
class Trace:
    path: str
    metadata: dict
    slices: list[Slice]
    counters: list[tuple[str, str, int, float]]  # (process, name, time ps, value)
    _rows: dict | None = field(default=None, repr=False)

    def rows(self) -> dict[tuple[str, str], list[Slice]]:
        """(process, row) -> its slices ordered by start (then longest first)."""
        if self._rows is None:
            rows: dict[tuple[str, str], list[Slice]] = defaultdict(list)
            for s in self.slices:
                rows[(s.process, s.row)].append(s)
            for v in rows.values():
                v.sort(key=lambda s: (s.begin, -s.end))
            self._rows = dict(rows)
        return self._rows


# ------------------------------------------------------------------------------------------------
# Reading


def _ps(us_value: Any) -> int:
    # Same conversion as the C++ reader: microseconds (6 decimals) -> integer picoseconds.
    return int(round(float(us_value) * 1e6))


def _read_json(path: str) -> Any:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise CLIError(f"{path}: no such file") from None
    except OSError as e:
        raise CLIError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CLIError(f"{path}: not a JSON file (binary data)") from None
    if not text.strip():
        raise CLIError(f"{path}: the file is empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        # Cut short: the error is at the very end, or a string runs from the last line to the end.
        last_line = text.rstrip().count("\n") + 1
        if e.pos >= len(text.rstrip()) or (
            e.msg.startswith("Unterminated string") and e.lineno == last_line
        ):
            raise CLIError(
                f"{path}: not valid JSON: the file ends early - was it truncated?"
            ) from None
        raise CLIError(
            f"{path}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})"
        ) from None


def _check_neuronsim(doc: Any, path: str) -> None:
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise CLIError(f'{path}: not a Chrome trace (no "traceEvents" array)')
    meta = doc.get("otherData")
    if not isinstance(meta, dict) or "device_time_ns" not in meta or "peaks" not in meta:
        raise CLIError(
            f'{path}: not a neuronsim trace (no neuronsim metadata in "otherData"; traces come '
            "from `neuronsim run --trace` or neuronsim.tracing)"
        )


def parse(doc: dict, path: str) -> Trace:
    _check_neuronsim(doc, path)
    events = doc["traceEvents"]
    processes: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "M":
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            if e.get("name") == "process_name":
                processes[e.get("pid")] = str(args.get("name", ""))
            elif e.get("name") == "thread_name":
                threads[(e.get("pid"), e.get("tid"))] = str(args.get("name", ""))
    slices: list[Slice] = []
    counters: list[tuple[str, str, int, float]] = []
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            continue
        ph = e.get("ph")
        try:
            if ph == "X":
                pid, tid = e.get("pid"), e.get("tid")
                begin = _ps(e["ts"])
                args = e.get("args")
                slices.append(
                    Slice(
                        processes.get(pid, f"pid {pid}"),
                        threads.get((pid, tid), f"tid {tid}"),
                        str(e.get("name", "")),
                        begin,
                        begin + _ps(e.get("dur", 0)),
                        args if isinstance(args, dict) else {},
                    )
                )
            elif ph == "C":
                pid = e.get("pid")
                args = e.get("args") if isinstance(e.get("args"), dict) else {}
                value = float(next(iter(args.values()))) if args else 0.0
                counters.append(
                    (processes.get(pid, f"pid {pid}"), str(e.get("name", "")), _ps(e["ts"]), value)
                )
        except (KeyError, TypeError, ValueError) as ex:
            raise CLIError(f"{path}: event {i} is malformed ({type(ex).__name__}: {ex})") from None
    return Trace(path, doc["otherData"], slices, counters)


def load(path: str) -> Trace:
    """Reads a neuronsim trace file; any problem is a one-line CLIError naming the file."""
    return parse(_read_json(path), path)


def load_summary(path: str) -> dict:
    """A run's summary from a trace file or from `neuronsim run --summary-json` output."""
    doc = _read_json(path)
    if isinstance(doc, dict) and doc.get("format") == SUMMARY_FORMAT:
        return doc
    if isinstance(doc, dict) and "traceEvents" not in doc:
        raise CLIError(
            f"{path}: neither a neuronsim trace nor a `neuronsim run --summary-json` file"
        )
    return summarize(parse(doc, path))


# ------------------------------------------------------------------------------------------------
# Summarising


def union_ps(intervals: list[tuple[int, int]]) -> int:
    total, cur_b, cur_e, open_ = 0, 0, 0, False
    for b, e in sorted(intervals):
        if not open_ or b > cur_e:
            if open_:
                total += cur_e - cur_b
            cur_b, cur_e, open_ = b, e, True
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_b if open_ else 0)


def _num(x: Any) -> float:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else 0.0


def _kernel_work(trace: Trace) -> tuple[dict[str, dict[str, float]], int]:
    """Per kernel name: FLOPs and bytes of the instructions inside its slices (on the same core).
    Also returns how many instruction slices lie in no kernel slice."""
    rows = trace.rows()
    work: dict[str, dict[str, float]] = defaultdict(
        lambda: {"flops": 0.0, "bytes": 0.0, "hbm_bytes": 0.0}
    )
    orphans = 0
    kernels_by_core = {p: s for (p, r), s in rows.items() if r == "Kernels"}
    begins = {p: [k.begin for k in ks] for p, ks in kernels_by_core.items()}
    for (process, row), slices in rows.items():
        if not is_instruction_row(row):
            continue
        ks, bs = kernels_by_core.get(process, []), begins.get(process, [])
        for s in slices:
            i = bisect.bisect_right(bs, s.begin) - 1
            if i < 0 or s.end > ks[i].end:
                orphans += 1
                continue
            w = work[ks[i].name]
            w["flops"] += _num(s.args.get("flops"))
            if is_dma_queue(row):
                w["bytes"] += _num(s.args.get("bytes"))
                w["hbm_bytes"] += _num(s.args.get("hbm_bytes"))
    return work, orphans


def _ops(trace: Trace) -> tuple[list[dict], int]:
    """Device op spans ("Ops" rows) by name. Nested spans (an op launching ops) count in their own
    name's total but only the outermost count towards the total op time."""
    agg: dict[str, list] = {}
    top_level = 0
    for (_, row), slices in trace.rows().items():
        if row != "Ops":
            continue
        open_ends: list[int] = []
        for s in slices:
            while open_ends and open_ends[-1] <= s.begin:
                open_ends.pop()
            if not open_ends:
                top_level += s.end - s.begin
            open_ends.append(s.end)
            a = agg.setdefault(s.name, [0, 0])
            a[0] += 1
            a[1] += s.end - s.begin
    ops = [
        {
            "name": n,
            "count": c,
            "total_ns": t / 1000,
            "percent": 100 * t / top_level if top_level else 0.0,
        }
        for n, (c, t) in agg.items()
    ]
    ops.sort(key=lambda o: (-o["total_ns"], o["name"]))
    return ops, top_level


def summarize(trace: Trace) -> dict:
    """Everything the subcommands print, as a JSON-ready dict (see module docstring)."""
    meta = trace.metadata
    rows = trace.rows()
    lo = min((s.begin for s in trace.slices), default=0)
    hi = max((s.end for s in trace.slices), default=0)
    span = hi - lo

    intervals: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    flops = dma_bytes = hbm_bytes = 0.0
    active: set[str] = set()
    for (process, row), slices in rows.items():
        engine, dma = row in COMPUTE_ENGINES or row == LOAD_STATIONARY, is_dma_queue(row)
        if not engine and not dma:
            continue
        if row != LOAD_STATIONARY:
            active.add(process)
        iv = [(s.begin, s.end) for s in slices]
        intervals[(process, row)].extend(iv)
        if dma:
            intervals[(process, ALL_DMA)].extend(iv)
            for s in slices:
                dma_bytes += _num(s.args.get("bytes"))
                hbm_bytes += _num(s.args.get("hbm_bytes"))
        flops += sum(_num(s.args.get("flops")) for s in slices)

    engines = []
    bottleneck, bottleneck_util = "", 0.0
    for process, engine in sorted(intervals):  # the C++ summary's order decides ties
        busy = union_ps(intervals[(process, engine)])
        util = busy / span if span > 0 else 0.0
        count = len(intervals[(process, engine)])
        engines.append(
            {
                "process": process,
                "engine": engine,
                "instructions": count,
                "busy_ns": busy / 1000,
                "utilisation": util,
            }
        )
        if (engine in COMPUTE_ENGINES or engine == ALL_DMA) and util > bottleneck_util:
            bottleneck, bottleneck_util = f"{process} {engine}", util
    engines.sort(key=lambda e: (e["process"], engine_sort_key(e["engine"])))

    peaks = meta.get("peaks") or {}
    config = meta.get("config") or {}
    cores = max(1, len(active))
    cores_per_stack = max(
        1.0, _num(config.get("chip.cores", 1)) / max(1.0, _num(config.get("chip.hbm_stacks", 1)))
    )
    peak_flops = _num(peaks.get("tensor_flops_per_core")) * cores
    peak_hbm = _num(peaks.get("hbm_bytes_per_s_per_stack")) * math.ceil(cores / cores_per_stack)
    seconds = span * 1e-12

    work, orphans = _kernel_work(trace)
    kernel_agg: dict[str, dict] = {}
    kernel_total = 0
    for (_, row), slices in rows.items():
        if row != "Kernels":
            continue
        for s in slices:
            k = kernel_agg.setdefault(
                s.name, {"name": s.name, "launches": 0, "total_ps": 0, "instructions": 0}
            )
            k["launches"] += 1
            k["total_ps"] += s.end - s.begin
            k["instructions"] += int(_num(s.args.get("instructions")))
            kernel_total += s.end - s.begin
    kernels = []
    for name, k in kernel_agg.items():
        w = work.get(name, {"flops": 0.0, "bytes": 0.0, "hbm_bytes": 0.0})
        t = k.pop("total_ps")
        k.update(total_ns=t / 1000, percent=100 * t / kernel_total if kernel_total else 0.0, **w)
        k["intensity"] = w["flops"] / w["hbm_bytes"] if w["hbm_bytes"] > 0 else None
        k["achieved_flops_per_s"] = w["flops"] / (t * 1e-12) if t > 0 else 0.0
        k["achieved_hbm_bytes_per_s"] = w["hbm_bytes"] / (t * 1e-12) if t > 0 else 0.0
        kernels.append(k)
    kernels.sort(key=lambda k: (-k["total_ns"], k["name"]))

    ops, op_total = _ops(trace)
    op_report = meta.get("op_report") or {}
    return {
        "format": SUMMARY_FORMAT,
        "trace": os.path.abspath(trace.path),
        "preset": meta.get("preset", ""),
        "overrides": meta.get("overrides") or {},
        "config": config,
        "peaks": peaks,
        "device_time_ns": _num(meta.get("device_time_ns")),
        "host_time_ns": _num(meta.get("host_time_ns")),
        "end_ns": _num(meta.get("end_ns")),
        "window_begin_ns": lo / 1000,
        "window_end_ns": hi / 1000,
        "window_ns": span / 1000,
        "bottleneck": bottleneck,
        "bottleneck_utilisation": bottleneck_util,
        "engines": engines,
        "active_cores": sorted(active),
        "flops": flops,
        "dma_bytes": dma_bytes,
        "hbm_bytes": hbm_bytes,
        "achieved_flops_per_s": flops / seconds if seconds > 0 else 0.0,
        "peak_flops_per_s": peak_flops,
        "achieved_hbm_bytes_per_s": hbm_bytes / seconds if seconds > 0 else 0.0,
        "peak_hbm_bytes_per_s": peak_hbm,
        "ops": ops,
        "op_time_ns": op_total / 1000,
        "kernels": kernels,
        "kernel_time_ns": kernel_total / 1000,
        "instructions_outside_kernels": orphans,
        "op_report": op_report,
        "native_calls": sum(int(_num(v.get("native"))) for v in op_report.values()),
        "fallback_calls": sum(int(_num(v.get("fallback"))) for v in op_report.values()),
        "fallback_ops": sorted(n for n, v in op_report.items() if _num(v.get("fallback")) > 0),
    }


def engine_utilisation(summary: dict) -> dict[str, float]:
    """Engine label -> utilisation for the compute engines and each core's DMA (all queues); the
    core is part of the label only when several cores ran."""
    multi = len(summary.get("active_cores", [])) > 1
    out = {}
    for e in summary["engines"]:
        if e["engine"] in COMPUTE_ENGINES or e["engine"] == ALL_DMA:
            label = f"{e['process']} {e['engine']}" if multi else e["engine"]
            out[label] = e["utilisation"]
    return out


def short_engine(summary: dict, name: str) -> str:
    """'nc0 TensorE' -> 'TensorE' when one core ran."""
    if len(summary.get("active_cores", [])) <= 1 and " " in name:
        return name.split(" ", 1)[1]
    return name
