"""torch.compile metrics in TorchNeuron's records (``get_dynamo_metrics``): one
``NeuronCompilationMetrics`` per graph neuronsim's graph compiler compiled since the last
``reset_dynamo_metrics()``.

neuronsim compiles in one step (no StableHLO lowering, no NEFF), so its compile time is
``torch_neuronx_compile_us`` and the two phase times TorchNeuron splits off are 0.
``TORCH_NEURONX_ENABLED_METRIC_TABLES=graph_stats`` writes the records as TorchNeuron's CSV at
exit (``$TORCH_NEURONX_METRICS_DIR/metric_table_graph_stats_rank<rank>.csv``).
"""

from __future__ import annotations

import atexit
import csv
import logging
import os
import threading
from dataclasses import dataclass, fields

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_first = 0  # index into the compiler's per-graph records where the current window starts


@dataclass
class NeuronCompilationMetrics:
    """Per-graph compilation metrics (TorchNeuron's fields).

    Attributes:
        graph_id: Unique identifier of the compiled graph.
        graph_name: Human-readable name ({model_name}_{graph} here: neuronsim's graph name).
        model_name: The model's name ("" when not given).
        has_collectives: Whether the graph contains collective operations.
        graph_node_count: Number of nodes in the FX graph.
        timestamp: Compilation order (the graph's index since the process started).
        torch_neuronx_fx_passes_us: FX graph-level passes (0: not timed apart).
        torch_neuronx_lower_us: Lowering to StableHLO (0: neuronsim has no such step).
        torch_neuronx_compile_us: Compile time in microseconds.
    """

    graph_id: str
    graph_name: str = ""
    model_name: str = ""
    has_collectives: bool = False
    graph_node_count: int = 0
    timestamp: str = ""
    torch_neuronx_fx_passes_us: int = 0
    torch_neuronx_lower_us: int = 0
    torch_neuronx_compile_us: int = 0


def _record(index: int, entry: dict) -> NeuronCompilationMetrics:
    shape = entry.get("shape")
    graph_id = entry["name"] if not shape else f"{entry['name']}{sorted(shape.items())}"
    return NeuronCompilationMetrics(
        graph_id=graph_id,
        graph_name=entry["name"],
        has_collectives=bool(entry.get("collective_nodes")),
        graph_node_count=int(entry["nodes"]),
        timestamp=str(index),
        torch_neuronx_compile_us=int(round(entry["compile_s"] * 1e6)),
    )


def _graphs() -> list[dict]:
    # The compiler's records (imported when asked: the compiler package imports torch.fx).
    from neuronsim.torch_compile import stats

    return stats.compile_stats()["per_graph"]


def get_dynamo_metrics() -> list[NeuronCompilationMetrics]:
    """All torch.compile compilation metrics since the last reset."""
    graphs = _graphs()
    with _lock:
        first = _first
    return [_record(i, g) for i, g in enumerate(graphs) if i >= first]


def reset_dynamo_metrics() -> None:
    """Forget the metrics recorded so far (neuronsim.compile_stats() keeps its totals)."""
    global _first
    with _lock:
        _first = len(_graphs())


def _write_csv_at_exit() -> None:
    enabled = {
        t.strip() for t in os.environ.get("TORCH_NEURONX_ENABLED_METRIC_TABLES", "").split(",")
    }
    if "graph_stats" not in enabled:
        return
    records = get_dynamo_metrics()
    if not records:
        return
    rank = os.environ.get("RANK", "0")
    directory = os.environ.get("TORCH_NEURONX_METRICS_DIR", "/tmp")
    path = os.path.join(directory, f"metric_table_graph_stats_rank{rank}.csv")
    header = [f.name for f in fields(NeuronCompilationMetrics)]
    try:
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            for m in records:
                writer.writerow([getattr(m, col) for col in header])
    except OSError as e:
        logger.warning(f"Failed to write metrics CSV to {path}: {e}")


atexit.register(_write_csv_at_exit)
