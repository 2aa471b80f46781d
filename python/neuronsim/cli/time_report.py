"""Where the simulated time went, as the report, `run`'s closing lines and `whatif` show it.

The numbers are the C++ ones (traces/time_account.h): the window split into kernels, host-device
copies, collectives, waiting for other ranks, CPU fallbacks, kernel launch overhead and idle time,
which add up to it; each engine's busy time; and the limit, what dominates the window. A trace
summary carries them (``time_account``, ``engines``, ``limit``); a run without a trace gets them
from the runtime (``neuronsim._C._time_report()``, engines from the device's statistics). Both
become one dict here: {"time_account", "engine_busy_ns", "limit"}.
"""

from __future__ import annotations

import re

from neuronsim.cli.formatting import pct, time_str

# Why a part shows, in one line each (the report's legend).
PART_NOTES = {
    "kernels": "a kernel runs on a NeuronCore (engines may still idle inside it)",
    "host_copies": "a host<->device transfer runs and no kernel does",
    "collectives": "a collective runs and no kernel does",
    "collective_wait": "this rank reached a collective and waits for the others",
    "cpu_fallback": "the host runs an op's CPU kernel while the device idles",
    "launch": "the host launches a kernel or issues a collective while the device idles",
    "idle": "nothing recorded: before the first op, or host time nothing above accounts for",
}


def from_summary(s: dict) -> dict:
    """The time report of a trace summary (trace_data.summarize)."""
    multi = len(s.get("active_cores", [])) > 1
    engines = {}
    for e in s.get("engines", []):
        if e.get("role") in ("engine", "dma"):
            label = f"{e['process']} {e['engine']}" if multi else e["engine"]
            engines[label] = e["busy_ns"]
    limit = dict(s["limit"])
    head = limit.get("name", "").split(" ", 1)
    if limit.get("engine") and not multi and len(head) == 2 and re.fullmatch(r"nc\d+", head[0]):
        limit["name"] = head[1]  # "nc0 VectorE" -> "VectorE" when one core ran
    return {"time_account": s["time_account"], "engine_busy_ns": engines, "limit": limit}


def from_runtime() -> dict:
    """The time report of this process's run so far, from the runtime (no trace needed)."""
    import json

    from neuronsim import _C

    rep = json.loads(_C._time_report())
    busy = dict(rep["engine_busy_ns"])  # [label, ns] pairs in the engine table's order
    rep["engine_busy_ns"] = busy
    # One core ran: engine labels without it, as the report shows them.
    cores = {label.split(" ", 1)[0] for label in busy}
    if len(cores) == 1:
        rep["engine_busy_ns"] = {label.split(" ", 1)[1]: v for label, v in busy.items()}
        if rep["limit"].get("engine"):
            rep["limit"]["name"] = rep["limit"]["name"].split(" ", 1)[1]
    return rep


def part(rep: dict, key: str) -> dict:
    return next(p for p in rep["time_account"]["parts"] if p["part"] == key)


def bottleneck_str(limit: dict, short=lambda name: name) -> str:
    """'nc0 VectorE (61.7% busy)' or 'kernel launch overhead (33.2% of the time)'."""
    if not limit.get("name"):
        return "-"
    if limit.get("engine"):
        return f"{short(limit['name'])} ({pct(limit['share'])} busy)"
    return f"{limit['name']} ({pct(limit['share'])} of the time)"


def _note(rep: dict, p: dict) -> str:
    window = rep["time_account"]["window_ns"]
    if p["part"] == "kernels":
        out = f"{p['count']} kernel launches"
        engines_busy = rep["time_account"].get("engines_busy_ns")
        if engines_busy is not None and window > 0:
            out += (
                f"; some engine busy {pct(engines_busy / window)}, "
                f"none busy {pct(max(0.0, p['ns'] - engines_busy) / window)}"
            )
        return out
    if p["part"] in ("launch", "cpu_fallback", "collectives", "host_copies") and p["count"]:
        what = {
            "launch": "launches",
            "cpu_fallback": "CPU fallbacks",
            "collectives": "collectives",
            "host_copies": "copies",
        }[p["part"]]
        out = f"{p['count']} {what}"
        if p["part"] in ("launch", "cpu_fallback"):
            out += f" at {time_str(p['total_ns'] / p['count'])}"
        if p["total_ns"] > 0:
            out += f", {pct(1 - p['ns'] / p['total_ns'])} hidden under kernels"
        return out
    return ""


TIME_HEADERS = ("part", "time", "share", "in all", "note")


def rows(rep: dict) -> list[tuple]:
    """One row per part with time (kernels always), then the total: the window."""
    acc = rep["time_account"]
    out = []
    for p in acc["parts"]:
        if p["part"] != "kernels" and p["ns"] == 0 and p["count"] == 0:
            continue
        in_all = time_str(p["total_ns"]) if p["part"] not in ("kernels", "idle") else ""
        out.append((p["name"], time_str(p["ns"]), pct(p["share"]), in_all, _note(rep, p)))
    total = sum(p["ns"] for p in acc["parts"])
    out.append(
        (
            "total (the window)",
            time_str(total),
            pct(total / acc["window_ns"] if acc["window_ns"] else 0),
            "",
            "",
        )
    )
    return out


def engines_line(rep: dict) -> str:
    """'TensorE 12.0%, VectorE 20.1%, ...': each engine's busy time over the window."""
    window = rep["time_account"]["window_ns"]
    items = [
        f"{label} {pct(ns / window if window else 0)}"
        for label, ns in rep["engine_busy_ns"].items()
    ]
    return ", ".join(items) or "-"


def closing_lines(rep: dict) -> list[str]:
    """`neuronsim run`'s lines after the first: the limit, the parts, the engines."""
    acc = rep["time_account"]
    parts = [
        f"{p['name']} {time_str(p['ns'])} ({pct(p['share'])})"
        for p in acc["parts"]
        if p["ns"] > 0 or p["part"] == "kernels"
    ]
    lines = [f"bottleneck: {bottleneck_str(rep['limit'])}"]
    launch = part(rep, "launch")
    if launch["count"]:
        lines[0] += (
            f"; {launch['count']} launches at "
            f"{time_str(launch['total_ns'] / launch['count'])} each"
        )
    lines.append(f"where the time went: {', '.join(parts)}")
    lines.append(f"engines busy: {engines_line(rep)} (of {time_str(acc['window_ns'])})")
    return lines
