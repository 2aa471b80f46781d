"""NKI data types: numpy dtypes (bfloat16 and fp8 from ml_dtypes), as ``nl.float32`` etc. are,
and their device names (device_model/docs/ISA.md 1.3)."""

import numpy as np

try:
    import ml_dtypes
except ImportError:  # the package's optional dependency (pip install 'neuronsim[nki]')
    raise ImportError(
        "NKI kernels need the ml_dtypes package (NKI's bfloat16 and fp8 numpy types): "
        "pip install 'neuronsim[nki]' (or pip install ml_dtypes)"
    ) from None

from neuronsim.nki.errors import NkiError

float32 = np.float32
float16 = np.float16
bfloat16 = ml_dtypes.bfloat16
float8_e4m3 = ml_dtypes.float8_e4m3fn  # OCP E4M3FN, the device's fp8_e4m3
float8_e5m2 = ml_dtypes.float8_e5m2
int32 = np.int32
int16 = np.int16
int8 = np.int8
uint8 = np.uint8
bool_ = np.bool_


class _TFloat32:
    """tfloat32: stored as fp32 (TensorE reads 19 bits of it; neuronsim computes in fp32)."""

    name = "tfloat32"
    itemsize = 4

    def __repr__(self):
        return "tfloat32"


tfloat32 = _TFloat32()

_DEVICE = {
    np.dtype(np.float32): "fp32",
    np.dtype(bfloat16): "bf16",
    np.dtype(np.float16): "fp16",
    np.dtype(float8_e4m3): "fp8_e4m3",
    np.dtype(float8_e5m2): "fp8_e5m2",
    np.dtype(np.int32): "int32",
    np.dtype(np.int16): "int16",
    np.dtype(np.int8): "int8",
    np.dtype(np.uint8): "uint8",
    np.dtype(np.bool_): "uint8",
}

_TORCH_NAMES = {
    "float32": np.float32,
    "bfloat16": bfloat16,
    "float16": np.float16,
    "float8_e4m3fn": float8_e4m3,
    "float8_e5m2": float8_e5m2,
    "int32": np.int32,
    "int16": np.int16,
    "int8": np.int8,
    "uint8": np.uint8,
    "bool": np.bool_,
}


def as_dtype(dt) -> np.dtype:
    """A numpy dtype for anything a kernel may name a type with (numpy types, nl.* types,
    torch dtypes, names)."""
    if type(dt) is np.dtype or isinstance(dt, np.dtype):
        return dt
    if dt is tfloat32:
        return np.dtype(np.float32)
    if isinstance(dt, np.dtype):
        return dt
    mod = type(dt).__module__
    if mod.startswith("torch"):
        name = str(dt).replace("torch.", "")
        if name not in _TORCH_NAMES:
            raise NkiError("dtype-support", f"torch dtype {dt} has no NKI equivalent")
        return np.dtype(_TORCH_NAMES[name])
    try:
        return np.dtype(dt)
    except TypeError as e:
        raise NkiError("dtype-support", f"{dt!r} is not a data type") from e


def device_name(dt) -> str:
    """The device's name for a dtype ("bf16"); a dtype the NeuronCore cannot hold is an error."""
    d = as_dtype(dt)
    name = _DEVICE.get(d)
    if name is None:
        raise NkiError(
            "dtype-support",
            f"{d} is not a NeuronCore data type (float32, bfloat16, float16, float8_e4m3, "
            "float8_e5m2, int32, int16, int8, uint8)",
        )
    return name


def is_float(dt) -> bool:
    return device_name(dt) in ("fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2")


def promote(a, b) -> np.dtype:
    """Result type of a binary operation between tiles (the wider float wins; fp32 for a mix of
    16-bit types, as the engines compute in fp32)."""
    a, b = as_dtype(a), as_dtype(b)
    if a == b:
        return a
    fa, fb = is_float(a), is_float(b)
    if fa and not fb:
        return a
    if fb and not fa:
        return b
    if not fa and not fb:
        return a if a.itemsize >= b.itemsize else b
    if a.itemsize != b.itemsize:
        return a if a.itemsize > b.itemsize else b
    return np.dtype(np.float32)
