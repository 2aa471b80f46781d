"""``nki.isa`` (current NKI, 0.3+): destination-first ISA calls, no return value.

``nc_matmul(dst, stationary, moving)`` into PSUM overwrites on the first write to a tile and
accumulates after (``accumulate=None``, the 0.3 behaviour); ``accumulate=True/False`` forces
either.
"""

from neuronsim.nki import _ops, _trace
from neuronsim.nki import isa_common as _ic
from neuronsim.nki import language_common as _lc
from neuronsim.nki._tensor import Tensor as _Tensor
from neuronsim.nki.isa_common import (  # noqa: F401
    engine_name,
    get_nc_version,
    gpsimd_engine,
    nc_version,
    scalar_engine,
    tensor_engine,
    unknown_engine,
    vector_engine,
)


def _dst(t, dst, what="dst"):
    if not isinstance(dst, _Tensor):
        raise t.error("index-type", f"{what} must be a tensor, not {type(dst).__name__}")
    return dst


def nc_matmul(
    dst,
    stationary,
    moving,
    is_stationary_onezero=False,
    is_moving_onezero=False,
    is_transpose=False,
    accumulate=None,
    perf_mode=None,
    **kwargs,
):
    t = _trace.current()
    _dst(t, dst)
    _ic._tile(t, stationary, "stationary")
    _ic._tile(t, moving, "moving")
    _ic.check_matmul(t, stationary, moving, dst.shape)
    fields = {"perf_mode": str(perf_mode)} if perf_mode else {}
    mode = 2 if accumulate is None else (1 if accumulate else 0)
    _ops.emit(
        "matmul",
        dst,
        stationary,
        moving,
        engine="tensor",
        fields=fields,
        accumulate=mode,
        producer=False,
    )


def nc_transpose(dst, data, engine=None, **kwargs):
    t = _trace.current()
    _dst(t, dst)
    _ic._tile(t, data, "data")
    eng = engine_name(engine, "tensor")
    if eng == "tensor":
        _ops.emit("transpose", dst, data, engine="tensor", producer=False)
    else:
        raise t.error(
            "engine-opcode", "neuronsim transposes on TensorE (engine=nisa.tensor_engine)"
        )


def dma_copy(dst, src, dst_rmw_op=None, oob_mode=None, dge_mode=None, **kwargs):
    t = _trace.current()
    if dst_rmw_op is not None:
        raise t.error("alu-op", "dma_copy with dst_rmw_op (DMA compute) is not modelled")
    _ic.dma_copy(dst, src)


def tensor_tensor(dst, data1, data2, op, engine=None, **kwargs):
    t = _trace.current()
    _dst(t, dst)
    for x in (data1, data2):
        _ic._tile(t, x, "data")
    a, b = data1, data2
    if a.shape != dst.shape and not _ops._shapes_compatible(dst, a):
        a = _ops.broadcast_for(a, dst.shape)
    if b.shape != dst.shape and not _ops._shapes_compatible(dst, b):
        b = _ops.broadcast_for(b, dst.shape)
    if a.buf.space == "psum" and b.buf.space == "psum":
        raise t.error("both-inputs-psum", "tensor_tensor cannot read both inputs from PSUM")
    _ops.emit(
        "tensor_tensor",
        dst,
        a,
        b,
        engine=engine_name(engine, "vector"),
        fields={"alu0": _lc.alu_of(op)},
        producer=False,
    )


def tensor_scalar(
    dst,
    data,
    op0,
    operand0,
    reverse0=False,
    op1=None,
    operand1=None,
    reverse1=False,
    engine=None,
    **kwargs,
):
    t = _trace.current()
    _dst(t, dst)
    _ic._tile(t, data, "data")
    _ic.emit_tensor_scalar(
        dst, data, op0, operand0, reverse0, op1, operand1, reverse1, engine=engine
    )


def activation(
    dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=None, **kwargs
):
    t = _trace.current()
    _dst(t, dst)
    _ic._tile(t, data, "data")
    _ic.emit_activation(dst, op, data, bias, scale, reduce_op, reduce_res)


def tensor_copy(dst, src, engine=None, dtype=None, **kwargs):
    t = _trace.current()
    _dst(t, dst)
    _ic._tile(t, src, "src")
    _ops.emit("tensor_copy", dst, src, engine=engine_name(engine, "vector"), producer=False)


def memset(dst, value, engine=None, **kwargs):
    t = _trace.current()
    _dst(t, dst)
    _ops.memset(dst, float(value), engine=engine_name(engine, "vector"))


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, **kwargs):
    t = _trace.current()
    _dst(t, dst)
    res = _ic.tensor_reduce(op, data, axis, negate=negate, keepdims=keepdims, dtype=dst.dtype)
    _ops.assign(dst, res)


def reciprocal(dst, data, **kwargs):
    _ops.assign(dst, _lc.reciprocal(data))


def iota(dst, expr=None, **kwargs):
    _ops.assign(dst, _ic.iota(expr, dst.dtype))


__all__ = [
    "nc_matmul",
    "nc_transpose",
    "dma_copy",
    "tensor_tensor",
    "tensor_scalar",
    "activation",
    "tensor_copy",
    "memset",
    "tensor_reduce",
    "reciprocal",
    "iota",
    "tensor_engine",
    "vector_engine",
    "scalar_engine",
    "gpsimd_engine",
    "unknown_engine",
    "get_nc_version",
    "nc_version",
]
