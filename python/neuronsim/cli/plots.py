"""PNG plots (matplotlib, Agg backend): the roofline and the engine timeline of a run, the curve
of a what-if sweep and the ranking of a sensitivity study."""

from __future__ import annotations

import io
import math

from neuronsim.cli.errors import CLIError

_PALETTE = ("tab:red", "tab:blue", "tab:green", "tab:purple", "tab:orange", "tab:brown")


def engine_colors() -> dict[str, str]:
    """One color per engine of the device model's engine table (its trace row name), in the
    table's order: the same on every plot."""
    from neuronsim import _C

    rows = [e["row"] for e in _C._engines()]
    return {row: _PALETTE[i % len(_PALETTE)] for i, row in enumerate(rows)}


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CLIError(
            "plots need matplotlib (pip install -r python/requirements-dev.txt)"
        ) from None
    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    _pyplot().close(fig)
    return buf.getvalue()


def _place_labels(ax, points: list[tuple[float, float]], labels: list[str], fontsize=8) -> None:
    """Labels next to their points without overlapping each other or other points: for each,
    the first of a ring of offsets whose box is clear (display coordinates)."""
    fig = ax.figure
    fig.canvas.draw()
    to_px = ax.transData.transform
    taken: list[tuple[float, float, float, float]] = []
    dots = [tuple(to_px(p)) for p in points]
    w_char, h = 0.62 * fontsize * fig.dpi / 72, 1.2 * fontsize * fig.dpi / 72

    def clear(box):
        x0, y0, x1, y1 = box
        for a0, b0, a1, b1 in taken:
            if x0 < a1 and a0 < x1 and y0 < b1 and b0 < y1:
                return False
        return all(not (x0 - 3 < dx < x1 + 3 and y0 - 3 < dy < y1 + 3) for dx, dy in dots)

    rings = [
        (dx, dy)
        for r in (6, 14, 24, 36)
        for dx, dy in ((r, r / 2), (r, -r), (-r, r / 2), (-r, -r), (0, r), (0, -r - h))
    ]
    for (px, py), text in zip(dots, labels, strict=True):
        w = w_char * len(text)
        dx = 0.0
        for dx, dy in rings:
            x0 = px + dx if dx >= 0 else px + dx - w
            box = (x0, py + dy, x0 + w, py + dy + h)
            if clear(box):
                break
        taken.append(box)
        ax.annotate(
            text,
            xy=ax.transData.inverted().transform((px, py)),
            xytext=(box[0] - px, box[1] - py),
            textcoords="offset pixels",
            fontsize=fontsize,
            arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "grey"} if abs(dx) > 10 else None,
        )


def roofline_points(summary: dict) -> tuple[list[dict], list[str]]:
    """Every kernel with its roofline coordinates against its busiest engine's own roof:
    x = the engine's busy time over the kernel's HBM traffic time at peak bandwidth (the
    kernel's intensity relative to that engine's ridge point), y = the engine's busy share of the
    kernel's time. A kernel can sit at most on min(1, x). Returns the points (kernel order, with
    "number", "engine", "x", "y", "x_clipped") and the names of kernels with no engine work."""
    points, skipped = [], []
    peak_b = summary.get("peak_hbm_bytes_per_s") or 0
    for i, k in enumerate(summary["kernels"]):
        busy = k.get("engine_busy_ns") or {}
        if not busy or k["total_ns"] <= 0 or max(busy.values()) <= 0:
            skipped.append(k["name"])
            continue
        engine = max(busy, key=lambda e: busy[e])
        hbm_ns = k["hbm_bytes"] / peak_b * 1e9 if peak_b > 0 else 0.0
        x = busy[engine] / hbm_ns if hbm_ns > 0 else math.inf
        points.append(
            {
                **k,
                "number": i + 1,
                "engine": engine,
                "x": x,
                "y": min(1.0, busy[engine] / k["total_ns"]),
                "x_clipped": False,
            }
        )
    return points, skipped


def roofline_png(summary: dict) -> bytes:
    """Every kernel against its busiest engine's roof (roofline_points), log-log; numbers are
    the kernel table's "#"."""
    plt = _pyplot()
    points, skipped = roofline_points(summary)
    fig, ax = plt.subplots(figsize=(9.5, 5.5))
    finite = [p["x"] for p in points if math.isfinite(p["x"])]
    x_lo = 10 ** math.floor(math.log10(min([*finite, 0.5]) / 2))
    x_hi = 10 ** math.ceil(math.log10(max([*finite, 2.0]) * 2))
    for p in points:
        if not math.isfinite(p["x"]):  # no HBM traffic: at the right edge
            p["x"], p["x_clipped"] = x_hi / 1.5, True
    y_lo = 10 ** math.floor(math.log10(min([p["y"] for p in points] + [0.5]) / 2))
    grid = [x_lo * (x_hi / x_lo) ** (i / 200) for i in range(201)]
    ax.plot(grid, [min(1.0, x) for x in grid], color="black", lw=2, label="roof: min(1, x)")
    ax.axvline(1.0, color="grey", ls=":", lw=1)
    ax.text(1.05, y_lo * 1.3, "ridge", color="grey", fontsize=8)
    ax.text(x_lo * 1.3, 1.25, "memory-bound side", fontsize=8, color="grey")
    ax.text(x_hi / 1.3, 1.25, "engine-bound side", fontsize=8, color="grey", ha="right")
    seen = set()
    colors = engine_colors()
    for p in points:
        color = colors.get(p["engine"], "black")
        label = None if p["engine"] in seen else f"bound by {p['engine']}"
        seen.add(p["engine"])
        ax.scatter(
            [p["x"]],
            [p["y"]],
            s=30 + 170 * min(1.0, p["percent"] / 50),
            color=color,
            marker=">" if p["x_clipped"] else "o",
            alpha=0.8,
            zorder=3,
            label=label,
            edgecolors="black",
            linewidths=0.5,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, 2.0)  # headroom above the roof for the notes
    if points:
        _place_labels(ax, [(p["x"], p["y"]) for p in points], [str(p["number"]) for p in points])
    ax.set_xlabel("engine busy time / HBM traffic time at peak bandwidth (intensity; ridge = 1)")
    ax.set_ylabel("busiest engine's busy share of the kernel")
    cores = len(summary.get("active_cores", []))
    ax.set_title(
        f"Roofline: every kernel against its busiest engine ({summary.get('preset') or '?'}, "
        f"{cores} core{'s' if cores != 1 else ''}; size: share of kernel time)",
        fontsize=10,
    )
    notes = []
    if skipped:
        notes.append(f"not shown (no engine work): {len(skipped)} kernel(s)")
    if any(p["x_clipped"] for p in points):
        notes.append("> at the right edge: no HBM traffic")
    if notes:
        ax.text(0.01, 0.01, "; ".join(notes), transform=ax.transAxes, fontsize=8, color="grey")
    if not points:
        ax.text(
            0.5,
            0.5,
            "no kernel in this trace",
            transform=ax.transAxes,
            ha="center",
            fontsize=11,
            color="grey",
        )
    ax.grid(True, which="both", alpha=0.25)
    # Outside the axes: never over a roof or a point.
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0)
    fig.tight_layout()
    return _png(fig)


def timeline_png(summary: dict) -> bytes:
    """Each engine's utilisation over time (the summary's binned timeline), and the parts of the
    time when no kernel ran (launch overhead, copies, ...), one row each."""
    plt = _pyplot()
    tl = summary.get("timeline") or {}
    rows = tl.get("rows") or []
    fig_h = 1.2 + 0.42 * max(1, len(rows))
    fig, ax = plt.subplots(figsize=(11, fig_h))
    if not rows:
        ax.text(0.5, 0.5, "no timeline in this trace", ha="center", transform=ax.transAxes)
        ax.set_axis_off()
        return _png(fig)
    begin, bin_ns = tl["begin_ns"], tl["bin_ns"]
    n = len(rows[0]["busy"])
    scale, unit = (1e6, "ms") if n * bin_ns >= 2e6 else (1e3, "us")
    extent = [begin / scale, (begin + n * bin_ns) / scale, len(rows) - 0.5, -0.5]
    import numpy as np

    data = np.array([r["busy"] for r in rows])
    im = ax.imshow(
        data, aspect="auto", cmap="viridis", vmin=0, vmax=1, extent=extent, interpolation="nearest"
    )
    ax.set_yticks(range(len(rows)), [r["label"] for r in rows], fontsize=8)
    parts = [i for i, r in enumerate(rows) if r["kind"] == "part"]
    if parts:  # a rule between the engines and the parts of idle time
        ax.axhline(parts[0] - 0.5, color="white", lw=2)
    ax.set_xlabel(f"simulated time ({unit})")
    ax.set_title(
        f"Engine utilisation over time ({n} bins of {bin_ns / 1e3:.2f} us); below the line: "
        "time the device idled, and why",
        fontsize=10,
    )
    cb = fig.colorbar(im, ax=ax, fraction=0.025, pad=0.01)
    cb.set_label("busy fraction of the bin", fontsize=8)
    fig.tight_layout()
    return _png(fig)


def _numeric(values: list[str]) -> list[float] | None:
    try:
        return [float(v) for v in values]
    except ValueError:
        return None


def log_axis(xs: list[float] | None) -> bool:
    """A sweep that spans a factor of 4 or more of positive values (doubling sweeps) is drawn
    on a log axis."""
    return bool(xs) and min(xs) > 0 and max(xs) / min(xs) >= 4


def sweep_png(sweeps: list[tuple[str, list[str]]], rows: list[dict], title: str = "") -> bytes:
    """Simulated time against the first sweep's values, one line per combination of the others.
    `rows` hold "values" (key -> value), "simulated_time_ns", "speedup" (against the baseline)
    and "baseline" (the stock preset's row)."""
    plt = _pyplot()
    key, values = sweeps[0]
    xs = _numeric(values)
    fig, ax = plt.subplots(figsize=(8, 5))
    lines: dict[tuple, list[tuple[float, float, dict]]] = {}
    for r in rows:
        rest = tuple((k, r["values"][k]) for k, _ in sweeps[1:])
        v = r["values"][key]
        if xs is not None:
            x = float(v)  # the stock value may lie outside the sweep's values
        elif v in values:
            x = values.index(v)
        else:
            continue
        lines.setdefault(rest, []).append((x, r["simulated_time_ns"] / 1e3, r))
    styles = ("-", "--", ":", "-.")
    markers = ("o", "s", "^", "D", "v", "x")
    top = 0.0
    for i, (rest, pts) in enumerate(lines.items()):
        pts.sort(key=lambda p: p[0])
        label = ", ".join(f"{k}={v}" for k, v in rest) or None
        # Lines that coincide (a parameter that changes nothing) stay visible: style and marker
        # differ, later lines are drawn thinner on top.
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            ls=styles[i % len(styles)],
            marker=markers[i % len(markers)],
            lw=max(1.0, 3.0 - i),
            ms=max(4, 9 - 2 * i),
            label=label,
        )
        for x, y, r in pts:
            top = max(top, y)
            text = "baseline" if r.get("baseline") else f"{r['speedup']:.2f}x"
            ax.annotate(
                text,
                (x, y),
                xytext=(0, 8 + 10 * i),
                textcoords="offset points",
                ha="center",
                fontsize=8,
                fontweight="bold" if r.get("baseline") else None,
            )
            if r.get("baseline"):
                ax.scatter(
                    [x],
                    [y],
                    marker="*",
                    s=260,
                    color="gold",
                    edgecolors="black",
                    zorder=4,
                    label="stock preset (baseline)",
                )
    if xs is None:
        ax.set_xticks(range(len(values)), values)
    else:
        shown = sorted({float(r["values"][key]) for r in rows})
        if log_axis(shown):
            ax.set_xscale("log", base=2)
            ax.minorticks_off()
        ax.set_xticks(shown, [f"{x:g}" for x in shown])
    ax.set_xlabel(key)
    ax.set_ylabel("simulated time (us)")
    ax.set_ylim(0, top * 1.2 if top > 0 else 1)  # headroom for the labels
    ax.set_title(title or "neuronsim what-if: simulated time", fontsize=10)
    ax.grid(True, alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=False))
    if len(unique) > 0:
        ax.legend(unique.values(), unique.keys(), fontsize=8, loc="lower left")
    fig.tight_layout()
    return _png(fig)


def sensitivity_png(rows: list[dict], title: str) -> bytes:
    """One bar per parameter, most effect first: the speedup with the parameter at 0.5x and at
    2x of the stock preset (log axis, 1x in the middle)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 1.4 + 0.5 * max(1, len(rows))))
    ys = list(range(len(rows)))[::-1]
    lo_all, hi_all = 1.0, 1.0
    for y, r in zip(ys, rows, strict=True):
        for scale, color in (("0.5x", "tab:red"), ("2x", "tab:green")):
            s = r["speedup"].get(scale)
            if s is None:
                continue
            lo_all, hi_all = min(lo_all, s), max(hi_all, s)
            ax.barh(
                y,
                s - 1.0,
                left=1.0,
                color=color,
                alpha=0.75,
                height=0.6,
                label=f"parameter at {scale}",
            )
            # Right of 1 for a speedup; for no change, the 0.5x label left and the 2x one right.
            right = s > 1.0005 or (abs(s - 1.0) <= 0.0005 and scale == "2x")
            ax.annotate(
                f"{s:.2f}x",
                (s, y),
                xytext=(4 if right else -4, 0),
                textcoords="offset points",
                ha="left" if right else "right",
                va="center",
                fontsize=8,
            )
    ax.axvline(1.0, color="black", lw=1)
    ax.set_yticks(ys, [f"{r['label']} ({r['key']})" for r in rows], fontsize=8)
    ax.set_xscale("log", base=2)
    pad = 1.35
    lo, hi = min(0.5, lo_all / pad), max(2.0, hi_all * pad)
    ax.set_xlim(lo, hi)
    ticks = [2.0**k for k in range(math.floor(math.log2(lo)), math.ceil(math.log2(hi)) + 1)]
    ax.set_xticks(ticks, [f"{t:g}x" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("speedup of the whole run against the stock preset (right: faster)")
    ax.set_title(title, fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=False))
    ax.legend(unique.values(), unique.keys(), fontsize=8, loc="lower right")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    return _png(fig)
