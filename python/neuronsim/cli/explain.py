"""What changed between a what-if point and the baseline, in words: which parts of the time and
which engines' busy time moved, and what now dominates the window. From two time reports
(time_report.py), e.g. "DMA (all queues) busy -42%; kernel launch overhead unchanged: 77% of the
window"."""

from __future__ import annotations

from neuronsim.cli.formatting import pct

UNCHANGED = 0.01  # a relative change below this is "unchanged"


def _items(rep: dict) -> dict[str, float]:
    """The things whose time can change: each part of the window, each engine's busy time."""
    out = {p["name"]: p["ns"] for p in rep["time_account"]["parts"] if p["part"] != "idle"}
    for label, ns in rep["engine_busy_ns"].items():
        out[f"{label} busy"] = ns
    return out


def _change(before: float, after: float) -> str:
    if before <= 0:
        return "new" if after > 0 else "unchanged"
    r = after / before - 1
    return "unchanged" if abs(r) < UNCHANGED else f"{r:+.0%}"


def what_changed(base: dict, point: dict) -> str:
    """`base`, `point`: time reports (the baseline's and a point's)."""
    lim = point["limit"]
    limit_name = lim.get("name") or "-"
    if base is point:
        return f"baseline; {limit_name} dominates"
    a, b = _items(base), _items(point)
    moved = sorted(
        (k for k in a.keys() | b.keys() if k != "kernels"),
        key=lambda k: -abs(b.get(k, 0.0) - a.get(k, 0.0)),
    )
    window = point["time_account"]["window_ns"]
    key = f"{limit_name} busy" if lim.get("engine") else limit_name
    state = _change(a.get(key, 0.0), b.get(key, 0.0))
    share = b.get(key, 0.0) / window if window else 0.0
    dominant = f"{key} {state}: {pct(share)} of the window"
    # The two things that moved most, the dominant one said once (at the end).
    changed = [
        f"{k} {_change(a.get(k, 0.0), b.get(k, 0.0))}"
        for k in moved[:2]
        if _change(a.get(k, 0.0), b.get(k, 0.0)) != "unchanged" and k != key
    ]
    if not changed:
        return dominant if state != "unchanged" else f"nothing changed; {dominant}"
    return f"{', '.join(changed)}; {dominant}"
