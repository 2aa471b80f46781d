"""PNG plots (matplotlib, Agg backend): the roofline of a run and the curve of a what-if sweep."""

from __future__ import annotations

import io
import math

from neuronsim.cli.errors import CLIError
from neuronsim.cli.formatting import time_str


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


def roofline_points(summary: dict) -> tuple[list[dict], list[str]]:
    """Kernels that can sit on a roofline (TensorE FLOPs and HBM bytes) and the names of those
    that cannot (no matmul FLOPs, or no HBM traffic)."""
    points, skipped = [], []
    for k in summary["kernels"]:
        if k["flops"] > 0 and k["hbm_bytes"] > 0 and k["total_ns"] > 0:
            points.append(k)
        else:
            skipped.append(k["name"])
    return points, skipped


def roofline_png(summary: dict) -> bytes:
    """x: arithmetic intensity (TensorE flop per HBM byte), y: achieved FLOP/s, log-log; the
    compute roof is the TensorE peak of the cores that ran, the memory roof their HBM peak."""
    plt = _pyplot()
    peak_f, peak_b = summary["peak_flops_per_s"], summary["peak_hbm_bytes_per_s"]
    points, skipped = roofline_points(summary)
    fig, ax = plt.subplots(figsize=(8, 5.5))
    ridge = peak_f / peak_b if peak_f > 0 and peak_b > 0 else 100.0
    xs = [p["intensity"] for p in points] + [ridge]
    x_lo = 10 ** math.floor(math.log10(min(xs) / 4))
    x_hi = 10 ** math.ceil(math.log10(max(xs) * 4))
    if peak_f > 0 and peak_b > 0:
        grid = [x_lo * (x_hi / x_lo) ** (i / 200) for i in range(201)]
        ax.plot(grid, [min(peak_f, x * peak_b) for x in grid], color="black", lw=2, label="roof")
        ax.axhline(
            peak_f,
            color="tab:red",
            ls="--",
            lw=1,
            label=f"compute roof {peak_f / 1e12:.2f} TFLOP/s (TensorE)",
        )
        ax.plot(
            grid,
            [x * peak_b for x in grid],
            color="tab:blue",
            ls="--",
            lw=1,
            label=f"memory roof {peak_b / 1e9:.0f} GB/s (HBM)",
        )
        ax.axvline(ridge, color="grey", ls=":", lw=1)
    for p in points:
        ax.scatter(
            [p["intensity"]],
            [p["achieved_flops_per_s"]],
            s=40,
            zorder=3,
            label=f"{p['name']} ({p['launches']}x, {time_str(p['total_ns'])})",
        )
    ys = [p["achieved_flops_per_s"] for p in points] + ([peak_f] if peak_f > 0 else [1e12])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(
        10 ** math.floor(math.log10(min(ys) / 10)), 10 ** math.ceil(math.log10(max(ys) * 2))
    )
    ax.set_xlabel("arithmetic intensity (TensorE flop / HBM byte)")
    ax.set_ylabel("achieved FLOP/s")
    title = f"Roofline ({summary['preset'] or 'unknown preset'}"
    title += (
        f", {len(summary['active_cores'])} core{'s' if len(summary['active_cores']) != 1 else ''})"
    )
    ax.set_title(title)
    if skipped:
        ax.text(
            0.01,
            0.01,
            f"not shown (no TensorE FLOPs or HBM bytes): {len(skipped)} kernel(s)",
            transform=ax.transAxes,
            fontsize=8,
            color="grey",
        )
    if not points:
        ax.text(
            0.5,
            0.5,
            "no kernel with TensorE FLOPs in this trace",
            transform=ax.transAxes,
            ha="center",
            fontsize=11,
            color="grey",
        )
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(loc="upper left", fontsize=7)  # above the memory roof: never data
    fig.tight_layout()
    return _png(fig)


def _numeric(values: list[str]) -> list[float] | None:
    try:
        return [float(v) for v in values]
    except ValueError:
        return None


def sweep_png(sweeps: list[tuple[str, list[str]]], rows: list[dict]) -> bytes:
    """Simulated time against the first sweep's values, one line per combination of the others.
    `rows` hold "values" (key -> value) and "simulated_time_ns"."""
    plt = _pyplot()
    key, values = sweeps[0]
    xs = _numeric(values)
    fig, ax = plt.subplots(figsize=(8, 5))
    lines: dict[tuple, list[tuple[float, float]]] = {}
    for r in rows:
        rest = tuple((k, r["values"][k]) for k, _ in sweeps[1:])
        x_index = values.index(r["values"][key])
        x = xs[x_index] if xs is not None else x_index
        lines.setdefault(rest, []).append((x, r["simulated_time_ns"] / 1e3))
    styles = ("-", "--", ":", "-.")
    markers = ("o", "s", "^", "D", "v", "x")
    for i, (rest, pts) in enumerate(lines.items()):
        pts.sort()
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
    if xs is None:
        ax.set_xticks(range(len(values)), values)
    ax.set_xlabel(key)
    ax.set_ylabel("simulated time (us)")
    ax.set_ylim(bottom=0)
    ax.set_title("neuronsim what-if: simulated time")
    ax.grid(True, alpha=0.3)
    if len(lines) > 1:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)
