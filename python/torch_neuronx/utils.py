"""TorchNeuron's public helpers (``torch_neuronx.utils``), answering for the simulated device:
the platform and LNC setting are the preset's, the environment switches read the same
variables, and the op-logging helpers feed neuronsim's op tracking. The NEFF cache helpers
answer for a cache that does not exist (nothing is ever cached, hit or missed)."""

from __future__ import annotations

import os
import typing as _t
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import torch
from torch._vendor.packaging.version import Version  # packaging, as torch ships it

from torch_neuronx import _C

# ==================== Tensor utilities ====================


def flatten_tensors(obj) -> list[torch.Tensor]:
    """Recursively flatten nested tensor structures (tensors, lists, tuples) into a list."""
    result = []
    if isinstance(obj, torch.Tensor):
        result.append(obj)
    elif isinstance(obj, list | tuple):
        for item in obj:
            result.extend(flatten_tensors(item))
    return result


def _get_first_tensor_device(obj) -> torch.device | None:
    if isinstance(obj, torch.Tensor):
        return obj.device
    if isinstance(obj, list | tuple):
        for item in obj:
            dev = _get_first_tensor_device(item)
            if dev is not None:
                return dev
    return None


def get_device_from_tensors(tensors) -> torch.device:
    """The device of the first tensor found, or the current neuron device when there is none."""
    dev = _get_first_tensor_device(tensors)
    return dev if dev is not None else torch.device("neuron", _C._neuron_getCurrentDevice())


@contextmanager
def suppress_specific_warnings(patterns):
    """Temporarily suppress warnings whose message contains one of ``patterns``."""
    original_showwarning = warnings.showwarning

    def _filtered_showwarning(message, category, filename, lineno, file=None, line=None):
        if any(pattern in str(message) for pattern in patterns):
            return
        original_showwarning(message, category, filename, lineno, file, line)

    try:
        warnings.showwarning = _filtered_showwarning
        yield
    finally:
        warnings.showwarning = original_showwarning


# ==================== Environment switches ====================


def use_mlir_aten_ops():
    """True if TORCH_NEURONX_MLIR_ATEN_OPS is "1" (TorchNeuron's import sets it by default)."""
    return os.environ.get("TORCH_NEURONX_MLIR_ATEN_OPS", "0") == "1"


def is_stablehlo_enabled() -> bool:
    """True unless TORCH_NEURONX_ENABLE_STABLEHLO is "0" or "false"."""
    return os.environ.get("TORCH_NEURONX_ENABLE_STABLEHLO", "1") not in ("0", "false")


def is_sync_mode_enabled():
    """True if NEURON_LAUNCH_BLOCKING is "1" (every launch waits for the device)."""
    return os.environ.get("NEURON_LAUNCH_BLOCKING", "0") == "1"


def get_gmm_align() -> int:
    """The grouped-matmul offset alignment, TORCH_NEURONX_ATEN_GMM_ALIGN (default 128)."""
    return int(os.environ.get("TORCH_NEURONX_ATEN_GMM_ALIGN", "128"))


def skip_op_preconditions() -> bool:
    """True if TORCH_NEURONX_SKIP_OP_PRECONDITIONS is "1"."""
    return os.environ.get("TORCH_NEURONX_SKIP_OP_PRECONDITIONS", "0") == "1"


def is_neff_cache_disabled():
    """True if TORCH_NEURONX_DISABLE_NEFF_CACHE is "1", "true" or "yes"."""
    return os.environ.get("TORCH_NEURONX_DISABLE_NEFF_CACHE", "").lower() in ["1", "true", "yes"]


# ==================== Platform ====================


def get_platform_target():
    """The platform target for NKI kernels: "trn1" or "trn2" (the preset's)."""
    return _C._get_platform_target()


def get_lnc_setting():
    """The logical NeuronCore setting of the simulated device ("1" or "2")."""
    return _C._get_logical_neuron_cores()


def get_logical_neuron_cores():
    """NEURON_LOGICAL_NC_CONFIG if set, otherwise the platform's setting."""
    return os.environ.get("NEURON_LOGICAL_NC_CONFIG", get_lnc_setting())


def get_worker_multiplier():
    """2 on trn2 with LNC=1 (twice the logical cores), 1 otherwise."""
    if get_platform_target() == "trn2" and get_logical_neuron_cores() == "1":
        return 2
    return 1


def _get_instance_type():
    return _C._get_instance_type()


# ==================== Op logging ====================


def log_executed_op(op_name: str):
    """Record ``op_name`` as executed on the device (get_executed_ops)."""
    _C._log_executed_op(op_name)


def log_offloaded_op(op_name: str):
    """Record ``op_name`` as fallen back to the CPU (get_fallback_ops)."""
    _C._log_offloaded_op(op_name)


def log_neff_cache_hit(cache_key: str):
    """No NEFF cache exists under neuronsim: nothing to log."""


def log_neff_cache_miss(cache_key: str):
    """No NEFF cache exists under neuronsim: nothing to log."""


def log_neff_cache_store(cache_key: str):
    """No NEFF cache exists under neuronsim: nothing to log."""


# ==================== Pytrees and dtypes ====================


def move_pytree_to_cpu(obj):
    """Recursively move neuron tensors to the CPU in nested lists, tuples and dicts."""
    if isinstance(obj, torch.Tensor) and obj.device.type == "neuron":
        return obj.to("cpu")
    if isinstance(obj, list | tuple):
        return type(obj)(move_pytree_to_cpu(x) for x in obj)
    if isinstance(obj, dict):
        return {k: move_pytree_to_cpu(v) for k, v in obj.items()}
    return obj


def move_pytree_to_neuron(obj):
    """Recursively move tensors to the neuron device in nested lists, tuples and dicts."""
    if isinstance(obj, torch.Tensor):
        return obj.to("neuron")
    if isinstance(obj, list | tuple):
        return type(obj)(move_pytree_to_neuron(x) for x in obj)
    if isinstance(obj, dict):
        return {k: move_pytree_to_neuron(v) for k, v in obj.items()}
    return obj


def cast_dtype_if_needed(tensor: torch.Tensor, target_dtype: torch.dtype | None) -> torch.Tensor:
    """``tensor.to(target_dtype)`` unless ``target_dtype`` is None or already its dtype."""
    if target_dtype is None or tensor.dtype == target_dtype:
        return tensor
    return tensor.to(dtype=target_dtype)


def convert_for_neuron(tensor: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """64-bit data as the device holds it: int64 -> int32, float64 -> float32."""
    target = {torch.int64: torch.int32, torch.float64: torch.float32}.get(tensor.dtype)
    if target is None:
        return tensor
    return tensor.to(target, non_blocking=non_blocking)


def is_float8_e4m3_supported():
    return get_platform_target() == "trn2"


def is_float8_e4m3fn_supported():
    return get_platform_target() != "trn2"


def is_mxocp_supported():
    return get_platform_target() != "trn2"


_MXFP8_value_tensor_dtypes = Literal["float8_e4m3fn", "float8_e5m2"]


@dataclass
class MXFP8:
    """MXFP8 data and scale tensors."""

    data: torch.Tensor
    scale: torch.Tensor
    dtype: _MXFP8_value_tensor_dtypes

    def __post_init__(self):
        if not is_mxocp_supported():
            raise Exception(
                f"MXOCP is not supported on this platform target: {get_platform_target()}"
            )
        if self.dtype not in get_args(_MXFP8_value_tensor_dtypes):
            supported = get_args(_MXFP8_value_tensor_dtypes)
            raise ValueError(
                f"Unsupported MXFP8 Value Tensor dtype: {self.dtype}. "
                f"Supported MXFP8 Value Tensor dtypes: {supported}"
            )


_BY_NAME: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "float64": torch.float64,
    "int32": torch.int32,
    "int64": torch.int64,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
    "bool_": torch.bool,
}


def map_external_dtype_to_torch(nki_or_numpy_dtype: _t.Any) -> torch.dtype:
    """Map an NKI or NumPy dtype to a torch.dtype (torch.float32 when unknown).

    NKI dtype objects (``nl.bfloat16``, the float8 types) are recognised by name; float8_e4m3 is
    float8_e4m3fn where the platform supports it (trn2), an error elsewhere, as in TorchNeuron.
    """
    if isinstance(nki_or_numpy_dtype, torch.dtype):
        return nki_or_numpy_dtype
    name = getattr(nki_or_numpy_dtype, "__name__", None) or getattr(
        nki_or_numpy_dtype, "name", None
    )
    if not isinstance(nki_or_numpy_dtype, np.dtype) and isinstance(name, str):
        target = None
        if name == "bfloat16":
            return torch.bfloat16
        if name == "float8_e5m2":
            return torch.float8_e5m2
        if name == "float8_e4m3":
            target = get_platform_target()
            if is_float8_e4m3_supported():
                return torch.float8_e4m3fn
            raise RuntimeError(f"Unexpected dtype {nki_or_numpy_dtype} for platform {target}")
        if name == "float8_e4m3fn":
            if not is_float8_e4m3fn_supported():
                raise RuntimeError(
                    f"Unsupported dtype {nki_or_numpy_dtype} for platform {get_platform_target()}"
                )
            return torch.float8_e4m3fn
    try:
        as_numpy = np.dtype(nki_or_numpy_dtype)
    except TypeError:
        return torch.float32
    return _BY_NAME.get(as_numpy.name, torch.float32)


def map_torch_dtype_to_external(_dtype):
    """The NumPy dtype of a torch.dtype. TorchNeuron maps bfloat16 and the float8 types to
    neuronx-cc's dtype objects, which neuronsim does not have: those are a TypeError here."""
    if _dtype == torch.float8_e4m3fn:
        raise RuntimeError("float8_e4m3fn is not supported in neuronxcc. ")
    if _dtype in (torch.bfloat16, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz):
        raise TypeError(
            f"{_dtype} maps to a neuronx-cc dtype object, and neuronsim has no neuronx-cc"
        )
    if _dtype == torch.bool:
        return np.uint8
    return torch.empty(1, dtype=_dtype, device="cpu").numpy().dtype.type


# ==================== Versions and registrations ====================

TORCH_VERSION = Version(torch.__version__)


def get_neuron_registered_ops(
    as_sorted: bool = False, keep_variant: bool = False
) -> set[str] | list[str]:
    """Op names registered for the neuron device (PrivateUse1): base names ("add"), or with their
    overload ("add.Tensor") when ``keep_variant``; a sorted list when ``as_sorted``."""
    registrations = torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")
    op_names = set()
    for reg in registrations:
        if "::" in reg:
            _, op = reg.split("::", 1)
            op_names.add(op if keep_variant else op.split(".")[0])
    return sorted(op_names) if as_sorted else op_names
