"""Distributed runs: one trace per rank, merged into one Perfetto timeline, and the per-rank
breakdown of simulated time into compute, communication and waiting.

Each rank of a distributed job writes its own trace (``<stem>.rank<R>.json``). The merged trace
has one process per rank ("rank 0 (instance 0, nc0)"); its rows are the rank's rows prefixed
with the process they came from ("nc0 TensorE", "nc0 Collectives pg0", "host ATen ops"), so the
ranks line up on one clock. ``otherData.ranks`` keeps every rank's own metadata and the path of
its own trace, which `neuronsim report --rank R` and the per-rank breakdown read.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from neuronsim.cli import trace_data
from neuronsim.cli.errors import CLIError
from neuronsim.cli.formatting import pct, table, time_str


def rank_path(path: str, rank: int) -> str:
    """out.json -> out.rank3.json"""
    p = Path(path)
    return str(p.with_name(f"{p.stem}.rank{rank}{p.suffix or '.json'}"))


def done_marker(path: str) -> str:
    return path + ".done"


def wait_for(paths: list[str], timeout_s: float) -> list[str]:
    """Waits until every rank trace is complete (its marker exists); returns the missing ones."""
    deadline = time.monotonic() + timeout_s
    while True:
        missing = [p for p in paths if not os.path.exists(done_marker(p))]
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(0.2)


def _label(meta: dict, rank: int) -> str:
    d = meta.get("distributed") or {}
    if "instance" in d and "core" in d:
        return f"rank {rank} (instance {d['instance']}, nc{d['core']})"
    return f"rank {rank}"


def merge(paths: list[str], out: str) -> dict:
    """Writes the ranks' traces (paths[r] is rank r's) as one trace; returns its metadata."""
    events: list[dict] = []
    ranks_meta = []
    for rank, path in enumerate(paths):
        doc = _read_doc(path)
        meta = doc["otherData"]
        ranks_meta.append({"rank": rank, "trace": os.path.abspath(path), "metadata": meta})
        pid = rank + 1
        procs, proc_order, threads, thread_order = {}, {}, {}, {}
        used = set()
        for e in doc["traceEvents"]:
            if not isinstance(e, dict):
                continue
            if e.get("ph") == "M":
                args = e.get("args") or {}
                key = (e.get("pid"), e.get("tid"))
                if e.get("name") == "process_name":
                    procs[e.get("pid")] = str(args.get("name", ""))
                elif e.get("name") == "process_sort_index":
                    proc_order[e.get("pid")] = int(args.get("sort_index", 0))
                elif e.get("name") == "thread_name":
                    threads[key] = str(args.get("name", ""))
                elif e.get("name") == "thread_sort_index":
                    thread_order[key] = int(args.get("sort_index", 0))
            elif e.get("ph") in ("X", "C"):
                used.add((e.get("pid"), e.get("tid") if e.get("ph") == "X" else None))
        events.append(
            {
                "ph": "M",
                "name": "process_name",
                "pid": pid,
                "tid": 0,
                "args": {"name": _label(meta, rank)},
            }
        )
        events.append(
            {
                "ph": "M",
                "name": "process_sort_index",
                "pid": pid,
                "tid": 0,
                "args": {"sort_index": rank},
            }
        )
        tids = {}
        for key in sorted(k for k in used if k[1] is not None):
            tids[key] = len(tids) + 1
            name = f"{procs.get(key[0], key[0])} {threads.get(key, key[1])}"
            order = proc_order.get(key[0], 0) * 1000 + thread_order.get(key, 0)
            events.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": pid,
                    "tid": tids[key],
                    "args": {"name": name},
                }
            )
            events.append(
                {
                    "ph": "M",
                    "name": "thread_sort_index",
                    "pid": pid,
                    "tid": tids[key],
                    "args": {"sort_index": order},
                }
            )
        for e in doc["traceEvents"]:
            if not isinstance(e, dict) or e.get("ph") not in ("X", "C"):
                continue
            e = dict(e)
            if e["ph"] == "X":
                e["tid"] = tids[(e.get("pid"), e.get("tid"))]
            else:
                e["name"] = f"{procs.get(e.get('pid'), e.get('pid'))} {e.get('name', '')}"
            e["pid"] = pid
            events.append(e)
    first = ranks_meta[0]["metadata"]

    def most(key):
        return max(float(r["metadata"].get(key, 0) or 0) for r in ranks_meta)

    meta = {
        "merged": True,
        "ranks": ranks_meta,
        "preset": first.get("preset", ""),
        "overrides": first.get("overrides", {}),
        "config": first.get("config", {}),
        "peaks": first.get("peaks", {}),
        "device_time_ns": most("device_time_ns"),
        "host_time_ns": most("host_time_ns"),
        "end_ns": most("end_ns"),
    }
    try:
        with open(out, "w") as f:
            json.dump({"traceEvents": events, "otherData": meta}, f)
    except OSError as e:
        raise CLIError(f"cannot write the merged trace '{out}': {e.strerror or e}") from None
    return meta


def _read_doc(path: str) -> dict:
    text = trace_data._read_text(path)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise CLIError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    meta = doc.get("otherData") if isinstance(doc, dict) else None
    if not isinstance(doc.get("traceEvents"), list) or not isinstance(meta, dict):
        raise CLIError(f"{path}: not a neuronsim trace (no traceEvents and otherData)")
    return doc


def read_metadata(path: str) -> dict:
    """A rank trace's metadata (its otherData)."""
    return _read_doc(path)["otherData"]


def _merged_meta(trace: trace_data.TraceFile) -> dict:
    try:
        return trace_data.metadata(trace)
    except CLIError:
        return {}


def is_merged(trace: trace_data.TraceFile) -> bool:
    meta = _merged_meta(trace)
    return bool(meta.get("merged")) and isinstance(meta.get("ranks"), list)


def rank_files(trace: trace_data.TraceFile) -> list[str]:
    """The ranks' own trace files a merged trace was made of (kept beside it)."""
    paths = [r["trace"] for r in _merged_meta(trace)["ranks"]]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise CLIError(
            f"{trace.path}: the per-rank traces it was merged from are gone ({missing[0]} ...)"
        )
    return paths


def breakdown(paths: list[str]) -> list[dict]:
    """Per rank, where its simulated time went (its trace's account, time_account.h): compute
    (kernels), communication not hidden under compute, waiting for other ranks, launch overhead
    and the rest, which add up to the rank's time; and the collectives' whole time, with how
    much of it compute hid (overlap)."""
    rows = []
    for rank, path in enumerate(paths):
        s = trace_data.summarize(trace_data.load(path))
        acc = s["time_account"]
        part = {p["part"]: p for p in acc["parts"]}
        d = s.get("distributed") or {}
        comm = part["collectives"]
        rows.append(
            {
                "rank": rank,
                "instance": d.get("instance"),
                "core": d.get("core"),
                "simulated_time_ns": acc["end_ns"],
                "window_ns": acc["window_ns"],
                "compute_ns": part["kernels"]["ns"],
                "communication_ns": comm["total_ns"],
                "communication_exposed_ns": comm["ns"],
                "waiting_ns": part["collective_wait"]["ns"],
                "launch_ns": part["launch"]["ns"],
                "other_ns": sum(part[k]["ns"] for k in ("host_copies", "cpu_fallback", "idle")),
                "overlap_ns": comm["total_ns"] - comm["ns"],
                "collectives": comm["count"],
                "time_account": acc,
            }
        )
    return rows


def format_breakdown(rows: list[dict]) -> str:
    """One line per rank; compute to other add up to the rank's time."""
    headers = [
        "rank",
        "core",
        "simulated time",
        "compute",
        "communication",
        "waiting",
        "launch overhead",
        "other",
        "hidden comm.",
        "collectives",
    ]

    def share(ns: float, whole: float) -> str:
        return f"{time_str(ns)} ({pct(ns / whole if whole else 0)})"

    body = []
    for r in rows:
        whole = r["window_ns"]
        core = f"i{r['instance']} nc{r['core']}" if r["core"] is not None else "-"
        body.append(
            [
                r["rank"],
                core,
                time_str(r["simulated_time_ns"]),
                share(r["compute_ns"], whole),
                share(r["communication_exposed_ns"], whole),
                share(r["waiting_ns"], whole),
                share(r["launch_ns"], whole),
                share(r["other_ns"], whole),
                time_str(r["overlap_ns"]),
                r["collectives"],
            ]
        )
    return table(headers, body, (True, False, *([True] * 8)))
