"""``nki.isa`` instructions in the legacy form (each returns its result tile); the current
generation's destination-first calls (current/isa.py) write into a given tile through the same
emitters."""

import math

import numpy as np

from neuronsim.nki import _dtypes, _ops, _trace
from neuronsim.nki import language_common as lc
from neuronsim.nki._tensor import Tensor


class _Engine:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"nisa.{self.name}_engine"


tensor_engine = _Engine("tensor")
vector_engine = _Engine("vector")
scalar_engine = _Engine("scalar")
gpsimd_engine = _Engine("gpsimd")
unknown_engine = _Engine("unknown")


def engine_name(engine, default):
    if engine is None or engine is unknown_engine:
        return default
    return engine.name if isinstance(engine, _Engine) else str(engine)


class nc_version:  # noqa: N801
    gen2 = 2
    gen3 = 3
    gen4 = 4


def get_nc_version():
    return nc_version.gen3 if _ops.params()["logical_core_size"] > 1 else nc_version.gen2


def _tile(t, x, what):
    if not isinstance(x, Tensor):
        raise t.error("index-type", f"{what} must be a tile, not {type(x).__name__}")
    if x.buf.space == "hbm":
        raise t.error(
            "data-movement", f"{what} {x.buf.name} is in HBM: engines compute on SBUF/PSUM tiles"
        )
    return x


def check_matmul(t, stationary, moving, dst_shape=None):
    p = _ops.params()
    k = stationary.partitions
    if k > p["tensor_rows"]:
        raise t.error(
            "matmul-contraction",
            f"contraction (partition) size {k} is over TensorE's {p['tensor_rows']} rows",
        )
    if moving.partitions != k:
        raise t.error(
            "shape-mismatch",
            f"matmul contracts over the partition axis: stationary has {k} partitions, "
            f"moving {moving.partitions}",
        )
    m, n = stationary.free_size(), moving.free_size()
    if m > p["tensor_columns"]:
        raise t.error(
            "matmul-stationary-size",
            f"stationary free size {m} is over {p['tensor_columns']} "
            "(nl.tile_size.gemm_stationary_fmax)",
        )
    if n > p["moving_free_max"]:
        raise t.error(
            "matmul-moving-size",
            f"moving free size {n} is over {p['moving_free_max']} "
            "(nl.tile_size.gemm_moving_fmax)",
        )
    for x in (stationary, moving):
        if not _dtypes.is_float(x.dtype):
            raise t.error("dtype-support", f"TensorE multiplies floats, not {x.dtype}")
    f32 = [str(x.dtype) == "float32" for x in (stationary, moving)]
    if any(f32) and not all(f32):
        raise t.error(
            "dtype-support",
            f"matmul of {stationary.dtype} by {moving.dtype}: fp32 pairs only with fp32",
        )
    if dst_shape is not None and (dst_shape[0] != m or math.prod(dst_shape[1:]) != n):
        raise t.error(
            "shape-mismatch", f"matmul result is [{m}, {n}], destination is {list(dst_shape)}"
        )
    return m, n


def nc_matmul(
    stationary,
    moving,
    is_stationary_onezero=False,
    is_moving_onezero=False,
    is_transpose=False,
    mask=None,
    perf_mode=None,
    **kwargs,
):
    t = _trace.current()
    _tile(t, stationary, "stationary")
    _tile(t, moving, "moving")
    m, n = check_matmul(t, stationary, moving)
    out = _ops.new_tile((m, n), np.float32, "psum")
    fields = {}
    if perf_mode:
        fields["perf_mode"] = str(perf_mode)
    _ops.emit("matmul", out, stationary, moving, engine="tensor", fields=fields, mask=mask)
    return out


def nc_transpose(data, mask=None, dtype=None, engine=None, **kwargs):
    t = _trace.current()
    _tile(t, data, "data")
    if len(data.shape) != 2:
        raise t.error("shape-mismatch", "nc_transpose takes a 2-D tile")
    p_, f = data.shape
    if engine_name(engine, "tensor") == "vector":
        if p_ > 32 or f > 32:
            raise t.error("transpose-size", "VectorE transposes 32x32 blocks at most")
    p = _ops.params()
    if p_ > p["tensor_rows"] or f > p["tensor_columns"]:
        raise t.error(
            "matmul-stationary-size",
            f"transpose input [{p_}, {f}] is over TensorE's "
            f"{p['tensor_rows']}x{p['tensor_columns']}",
        )
    out_dtype = dtype or data.dtype
    out = _ops.new_tile((f, p_), out_dtype, "psum")
    _ops.emit("transpose", out, data, engine="tensor", mask=mask)
    return out


def _alu(op):
    return lc.alu_of(op)


def tensor_tensor(data1, data2, op, dtype=None, mask=None, engine=None, **kwargs):
    return lc.binary(
        _alu(op), data1, data2, dtype=dtype, mask=mask, engine=engine_name(engine, "vector")
    )


def tensor_scalar(
    data,
    op0,
    operand0,
    reverse0=False,
    op1=None,
    operand1=None,
    reverse1=False,
    dtype=None,
    mask=None,
    engine=None,
    **kwargs,
):
    t = _trace.current()
    _tile(t, data, "data")
    out = _ops.new_tile(data.shape, dtype or data.dtype, "sbuf")
    emit_tensor_scalar(out, data, op0, operand0, reverse0, op1, operand1, reverse1, mask, engine)
    return out


def emit_tensor_scalar(
    out,
    data,
    op0,
    operand0,
    reverse0=False,
    op1=None,
    operand1=None,
    reverse1=False,
    mask=None,
    engine=None,
):
    fields = {"alu0": _alu(op0), "reverse0": bool(reverse0)}
    if op1 is not None:
        fields["alu1"] = _alu(op1)
        fields["reverse1"] = bool(reverse1)
    _ops.emit(
        "tensor_scalar",
        out,
        data,
        op0=_scalar_operand(operand0),
        op1=_scalar_operand(operand1) if op1 is not None else None,
        engine=engine_name(engine, "vector"),
        fields=fields,
        mask=mask,
    )


def _scalar_operand(x):
    if x is None:
        return 0.0
    if isinstance(x, Tensor):
        return x
    return float(x)


def activation(
    op,
    data,
    bias=None,
    scale=1.0,
    reduce_op=None,
    reduce_res=None,
    reduce_cmd=None,
    dtype=None,
    mask=None,
    **kwargs,
):
    t = _trace.current()
    _tile(t, data, "data")
    out = _ops.new_tile(data.shape, dtype or data.dtype, "sbuf")
    emit_activation(out, op, data, bias, scale, reduce_op, reduce_res, mask)
    return out


def emit_activation(
    out, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, mask=None
):
    t = _trace.current()
    if (
        reduce_res is not None
        and reduce_op is not None
        and lc.op_name(reduce_op) not in ("add", "sum")
    ):
        raise t.error("alu-op", "activation accumulates with add only")
    _ops.emit(
        "activation",
        out,
        data,
        acc=reduce_res,
        engine="scalar",
        fields={"func": lc.act_of(op)},
        op0=_scalar_operand(scale),
        op1=_scalar_operand(bias),
        mask=mask,
    )


def activation_reduce(
    op, data, reduce_op, reduce_res, bias=None, scale=1.0, dtype=None, mask=None, **kwargs
):
    return activation(
        op,
        data,
        bias=bias,
        scale=scale,
        reduce_op=reduce_op,
        reduce_res=reduce_res,
        dtype=dtype,
        mask=mask,
    )


def tensor_reduce(op, data, axis, negate=False, keepdims=False, dtype=None, mask=None, **kwargs):
    name = _alu(op)
    red = {"add": "add", "max": "max", "min": "min", "multiply": "multiply"}.get(name)
    if red is None:
        raise _trace.current().error("alu-op", f"tensor_reduce does not reduce with {name}")
    return lc.reduce(red, data, axis, dtype=dtype, keepdims=keepdims, mask=mask, negate=negate)


def tensor_copy(src, dtype=None, mask=None, engine=None, **kwargs):
    t = _trace.current()
    _tile(t, src, "src")
    out = _ops.new_tile(src.shape, dtype or src.dtype, "sbuf")
    _ops.emit("tensor_copy", out, src, engine=engine_name(engine, "vector"), mask=mask)
    return out


def memset(shape, value, dtype, mask=None, engine=None, **kwargs):
    out = _ops.new_tile(shape, dtype, "sbuf")
    _ops.memset(out, float(value), engine=engine_name(engine, "vector"), mask=mask)
    return out


def iota(expr, dtype, mask=None, **kwargs):
    """Values of an index expression (nl.arange/mgrid arithmetic) into a new tile (GpSimdE)."""
    from neuronsim.nki._expr import IndexExpr

    t = _trace.current()
    e = IndexExpr.lift(expr)
    if e.loops:
        raise t.error("index-type", "iota takes an expression of tile indices and constants")
    shape = e.shape or (1,)
    out = _ops.new_tile(shape, dtype, "sbuf")
    steps = [e.axes.get(d, 0) for d in range(1, len(shape))]
    _ops.emit(
        "iota",
        out,
        engine="gpsimd",
        fields={
            "iota_base": int(e.const),
            "iota_channel_multiplier": int(e.axes.get(0, 0)),
            "iota_steps": steps,
        },
        mask=mask,
    )
    return out


def dma_copy(dst, src, mask=None, **kwargs):
    t = _trace.current()
    for x, what in ((dst, "dst"), (src, "src")):
        if not isinstance(x, Tensor):
            raise t.error("index-type", f"dma_copy {what} must be a tensor")
    if math.prod(dst.shape or (1,)) != math.prod(src.shape or (1,)):
        raise t.error(
            "shape-mismatch",
            f"dma_copy of {list(src.shape)} into {list(dst.shape)}: element counts differ",
        )
    _ops.emit("dma_copy", dst, src, engine="dma", mask=mask)


def select(predicate, on_true, on_false, dtype=None, mask=None, **kwargs):
    return lc.where(predicate, on_true, on_false, dtype=dtype, mask=mask)


def reciprocal(data, dtype=None, mask=None, **kwargs):
    return lc.reciprocal(data, dtype=dtype, mask=mask)


_CMP = {"<": "is_lt", "<=": "is_le", ">": "is_gt", ">=": "is_ge", "==": "is_equal"}


def affine_select(pred, on_true_tile, on_false_value, mask=None, dtype=None, **kwargs):
    """``on_true_tile`` where the affine predicate of the tile indices holds, else
    ``on_false_value`` (a causal mask: ``i_p >= i_f``): each comparison's expression is made with
    GpSimdE's iota, compared on VectorE, and the tile selected on VectorE."""
    from neuronsim.nki._expr import IndexExpr, Predicate

    t = _trace.current()
    _tile(t, on_true_tile, "on_true_tile")
    if not isinstance(pred, Predicate):
        raise t.error("mask", "affine_select takes a comparison of tile indices")
    shape = on_true_tile.shape
    cond = None
    for expr, op in pred.atoms:
        e = IndexExpr.lift(expr)
        if e.loops:
            raise t.error(
                "mask",
                "affine_select predicates with loop indices are not supported "
                "yet (only tile indices and constants)",
            )
        shift = len(shape) - len(e.shape)
        aligned = IndexExpr(e.const, {}, {d + shift: c for d, c in e.axes.items()}, shape)
        values = iota(aligned, np.int32)
        c = _ops.new_tile(shape, np.float32, "sbuf")
        _ops.emit("tensor_scalar", c, values, op0=0.0, engine="vector", fields={"alu0": _CMP[op]})
        if cond is not None:
            both = _ops.new_tile(shape, np.float32, "sbuf")
            _ops.emit("tensor_tensor", both, cond, c, engine="vector", fields={"alu0": "multiply"})
            c = both
        cond = c
    out = _ops.new_tile(shape, dtype or on_true_tile.dtype, "sbuf")
    _ops.emit(
        "select",
        out,
        cond,
        on_true_tile,
        engine="vector",
        fields={"imm": float(on_false_value)},
        mask=mask,
    )
    return out
