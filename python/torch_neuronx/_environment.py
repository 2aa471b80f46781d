"""The environment variables TorchNeuron reads, and what each does under neuronsim.

``import torch_neuronx`` sets the same defaults TorchNeuron's import sets (``os.environ``
``setdefault``, so a value the user set wins and subprocesses see what they would see on
Trainium). Each variable is one of:

- modelled: it has the same effect on the simulated device (read by neuronsim where the effect
  happens: the runtime, the op tracker, the compiler);
- reported: only TorchNeuron's helpers read it (``torch_neuronx.utils``), as there;
- ignored: it tunes something that exists only on hardware or in TorchNeuron's compiler path
  (NEFF caches, the Neuron runtime's internals, StableHLO lowering), and has no effect here.

docs/torch_neuronx.md has the table; ``VARIABLES`` is its source.
"""

from __future__ import annotations

import os

# TorchNeuron's import-time defaults (torch_neuronx/__init__.py, editable build configuration).
DEFAULTS = {
    "JAX_LOGGING_LEVEL": "WARNING",
    "NEURON_LAUNCH_BLOCKING": "0",
    "TORCH_NEURONX_MLIR_ATEN_OPS": "1",
    "TORCH_NEURONX_RETAIN_DEVICE_MODE": "0",
    "NEURON_RT_ALLOW_LEGACY_NEFF": "1",
    "NEURON_RT_DBG_ZEROCOPY": "1",
    "TORCH_NEURONX_ENABLE_ASYNC_NRT": "1",
    "TORCH_NEURONX_ENABLE_STACK_TRACE": "0",
}

# name -> (kind, what it does here)
VARIABLES = {
    "NEURON_LAUNCH_BLOCKING": ("modelled", "1: every launch waits for the device (sync mode)"),
    "NEURON_RT_VISIBLE_CORES": ("modelled", "the visible logical cores (device_count)"),
    "NEURON_RT_NUM_CORES": ("modelled", "the first N logical cores"),
    "NEURON_LOGICAL_NC_CONFIG": (
        "modelled",
        "physical cores per logical core (1 or 2; 2 only on trn2)",
    ),
    "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS": (
        "modelled",
        "1: an op with a device kernel that cannot take its arguments raises instead of "
        "falling back to the CPU (ops without a device kernel still fall back)",
    ),
    "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION": (
        "modelled",
        "1: a torch.compile graph that fails to compile raises instead of running eagerly",
    ),
    "TORCH_NEURONX_ENABLED_METRIC_TABLES": (
        "modelled",
        "graph_stats: get_dynamo_metrics() written as CSV at exit",
    ),
    "TORCH_NEURONX_METRICS_DIR": ("modelled", "where the metric tables are written (/tmp)"),
    "TORCH_NEURONX_MLIR_ATEN_OPS": ("reported", "utils.use_mlir_aten_ops()"),
    "TORCH_NEURONX_ENABLE_STABLEHLO": ("reported", "utils.is_stablehlo_enabled()"),
    "TORCH_NEURONX_ATEN_GMM_ALIGN": ("reported", "utils.get_gmm_align()"),
    "TORCH_NEURONX_SKIP_OP_PRECONDITIONS": ("reported", "utils.skip_op_preconditions()"),
    "TORCH_NEURONX_DISABLE_NEFF_CACHE": ("reported", "utils.is_neff_cache_disabled()"),
    "TORCH_NEURONX_RETAIN_DEVICE_MODE": ("ignored", "TorchNeuron's compiled-graph executor"),
    "TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY": ("ignored", "TorchNeuron's executor"),
    "TORCH_NEURONX_ENABLE_STACK_TRACE": ("ignored", "TorchNeuron's per-op stack capture"),
    "TORCH_NEURONX_ENABLE_ASYNC_NRT": ("ignored", "Neuron runtime execution mode"),
    "TORCH_NEURONX_METRICS_ENABLED": ("ignored", "TorchNeuron's NEFF-cache/NRT counters"),
    "TORCH_NEURONX_LOG_LEVEL": ("ignored", "TorchNeuron's logger"),
    "TORCH_NEURONX_LOG_FILE": ("ignored", "TorchNeuron's logger"),
    "TORCH_NEURONX_DEBUG_DIR": ("ignored", "FX/StableHLO/NEFF artifacts"),
    "TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS": ("ignored", "FX/StableHLO/NEFF artifacts"),
    "TORCH_NEURONX_NEFF_CACHE_DIR": ("ignored", "NEFF cache"),
    "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR": ("ignored", "NEFF cache"),
    "TORCH_NEURONX_NEFF_DISABLE_CACHE": ("ignored", "NEFF cache"),
    "TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT": ("ignored", "NEFF cache"),
    "NEURON_COMPILATION_CACHE_MAX_SIZE_MB": ("ignored", "NEFF cache"),
    "NEURON_COMPILATION_CACHE_MAX_ENTRIES": ("ignored", "NEFF cache"),
    "NEURON_CC_FLAGS": ("ignored", "neuronx-cc flags"),
    "NEURON_COMPILER_OPT_LEVEL": ("ignored", "neuronx-cc optimisation level"),
    "NEURON_RT_ALLOW_LEGACY_NEFF": ("ignored", "Neuron runtime"),
    "NEURON_RT_DBG_ZEROCOPY": ("ignored", "Neuron runtime"),
    "NEURON_RT_ENABLE_HOST_CC": (
        "ignored",
        "TorchNeuron routes every stream to the default one unless it is 1; neuronsim's "
        "streams are always separate (as with 1)",
    ),
    "NEURON_RT_ROOT_COMM_ID": ("ignored", "Neuron runtime collectives bootstrap"),
    "NEURON_USE_SPLIT_ALLGATHER": ("ignored", "collective implementation strategy"),
    "NEURON_USE_SPLIT_REDUCE_SCATTER": ("ignored", "collective implementation strategy"),
    "COLLECTIVE_BUCKETSIZE_IN_MB": ("ignored", "collective bucketing"),
    "COLLECTIVE_MIN_BUCKETS": ("ignored", "collective bucketing"),
    "JAX_LOGGING_LEVEL": ("ignored", "TorchNeuron's JAX lowering"),
}


def apply_defaults() -> None:
    for name, value in DEFAULTS.items():
        os.environ.setdefault(name, value)


def flag(name: str) -> bool:
    """A boolean variable as TorchNeuron reads it: set to "1"."""
    return os.environ.get(name, "0") == "1"
