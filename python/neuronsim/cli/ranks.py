"""Distributed runs: one trace per rank, merged into one Perfetto timeline, and the per-rank
breakdown of simulated time into compute, communication and waiting.

Each rank of a distributed job writes its own trace (``<stem>.rank<R>.json``). The merged trace
has one process per rank ("rank 0 (instance 0, nc0)"); its rows are the rank's rows prefixed
with the process they came from ("nc0 TensorE", "nc0 Collectives pg0", "host ATen ops"), so the
ranks line up on one clock. ``otherData.ranks`` keeps every rank's own metadata; ``split`` turns
a merged trace back into per-rank traces that every other summary understands.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from neuronsim.cli import trace_data
from neuronsim.cli.errors import CLIError
from neuronsim.cli.formatting import pct, table, time_str

COLLECTIVE_ROW = "Collectives "
WAIT_PREFIX = "wait "


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
        doc = trace_data._read_json(path)
        trace_data._check_neuronsim(doc, path)
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


def is_merged(trace: trace_data.Trace) -> bool:
    return bool(trace.metadata.get("merged")) and isinstance(trace.metadata.get("ranks"), list)


def split(trace: trace_data.Trace) -> list[trace_data.Trace]:
    """A merged trace as one trace per rank, rows and processes as the rank wrote them."""
    ranks = trace.metadata["ranks"]
    labels = {_label(r["metadata"], r["rank"]): r["rank"] for r in ranks}
    slices = [[] for _ in ranks]
    counters = [[] for _ in ranks]
    for s in trace.slices:
        r = labels.get(s.process)
        if r is None:
            continue
        process, _, row = s.row.partition(" ")
        slices[r].append(trace_data.Slice(process, row, s.name, s.begin, s.end, s.args))
    for process, name, t, value in trace.counters:
        r = labels.get(process)
        if r is not None:
            proc, _, counter = name.partition(" ")
            counters[r].append((proc, counter, t, value))
    return [
        trace_data.Trace(r["trace"], r["metadata"], slices[r["rank"]], counters[r["rank"]])
        for r in ranks
    ]


def breakdown(rank_traces: list[trace_data.Trace]) -> list[dict]:
    """Per rank: simulated time, compute (kernels), communication (collectives), waiting for
    other ranks, and how much compute and communication overlapped."""
    rows = []
    for rank, t in enumerate(rank_traces):
        kernels, comm, waited, count = [], [], 0, 0
        for s in t.slices:
            if s.row == "Kernels":
                kernels.append((s.begin, s.end))
            elif s.row.startswith(COLLECTIVE_ROW):
                if s.name.startswith(WAIT_PREFIX):
                    waited += s.end - s.begin
                else:
                    comm.append((s.begin, s.end))
                    count += 1
        compute_ps = trace_data.union_ps(kernels)
        comm_ps = trace_data.union_ps(comm)
        both = trace_data.union_ps(kernels + comm)
        d = t.metadata.get("distributed") or {}
        rows.append(
            {
                "rank": rank,
                "instance": d.get("instance"),
                "core": d.get("core"),
                "simulated_time_ns": float(t.metadata.get("end_ns", 0) or 0),
                "compute_ns": compute_ps / 1000,
                "communication_ns": comm_ps / 1000,
                "waiting_ns": waited / 1000,
                "overlap_ns": (compute_ps + comm_ps - both) / 1000,
                "collectives": count,
            }
        )
    return rows


def format_breakdown(rows: list[dict]) -> str:
    headers = [
        "rank",
        "core",
        "simulated time",
        "compute",
        "communication",
        "waiting",
        "overlap",
        "collectives",
    ]

    def share(ns: float, end: float) -> str:
        return f"{time_str(ns)} ({pct(ns / end if end else 0)})"

    body = []
    for r in rows:
        end = r["simulated_time_ns"]
        core = f"i{r['instance']} nc{r['core']}" if r["core"] is not None else "-"
        body.append(
            [
                r["rank"],
                core,
                time_str(end),
                share(r["compute_ns"], end),
                share(r["communication_ns"], end),
                share(r["waiting_ns"], end),
                time_str(r["overlap_ns"]),
                r["collectives"],
            ]
        )
    return table(headers, body, (True, False, True, True, True, True, True, True))
