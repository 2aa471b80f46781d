"""Units and plain-text tables shared by the subcommands."""

from __future__ import annotations

from collections.abc import Sequence


def time_str(ns: float) -> str:
    """Simulated time in the unit the C++ summary uses (ns, us, ms, s)."""
    if ns >= 1e9:
        return f"{ns * 1e-9:.3f} s"
    if ns >= 1e6:
        return f"{ns * 1e-6:.3f} ms"
    if ns >= 1e3:
        return f"{ns * 1e-3:.3f} us"
    return f"{ns:.1f} ns"


def bytes_str(b: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale:
            return f"{b / scale:.2f} {unit}"
    return f"{b:.0f} B"


def rate_str(value: float, unit: str) -> str:
    """1.23e12 FLOP/s -> '1.23 TFLOP/s'."""
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value:.2f} {unit}"


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def ratio_str(a: float, b: float) -> str:
    """B relative to A."""
    return f"{b / a:.3f}x" if a > 0 else "-"


def table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], right: Sequence[bool] = ()
) -> str:
    """A plain-text table; columns are right-aligned where `right[i]` (default: all but first)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    align = list(right) or [i > 0 for i in range(len(headers))]
    lines = []
    for n, r in enumerate(cells):
        parts = [
            c.rjust(w) if align[i] else c.ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        lines.append("  ".join(parts).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
