"""Instruction emission shared by both API generations: new tiles and HBM tensors, one helper
per ISA family, and assignment (``tile[...] = nl.load(...)`` writes the load straight into the
tile, as the NKI compiler does, instead of loading into a temporary and copying)."""

import math

import numpy as np

from neuronsim.nki import _trace
from neuronsim.nki._dtypes import as_dtype, device_name, is_float
from neuronsim.nki._tensor import ParDim, Tensor

_params = None


def params() -> dict:
    """The core's limits from the preset in force (partitions, SBUF/PSUM sizes, matmul sizes)."""
    global _params  # noqa: PLW0603
    if _params is None:
        from neuronsim.nki import _runner

        _params = _runner.core_params()
    return _params


def reset_params():
    global _params  # noqa: PLW0603
    _params = None


# ---- tensors ----
def new_tile(shape, dtype, space="sbuf", name=None, zero=False) -> Tensor:
    t = _trace.current()
    src = t.source_id()
    if space not in ("sbuf", "psum"):
        raise t.error("memory-space", f"unknown on-chip buffer {space}", src)
    shape = tuple(shape)
    par = next((i for i, s in enumerate(shape) if isinstance(s, ParDim)), 0)
    shape = tuple(int(s) for s in shape)
    dtype = as_dtype(dtype)
    device_name(dtype)
    if not shape:
        shape = (1,)
    p = params()
    parts = shape[par]
    limit = p["sbuf_partitions"] if space == "sbuf" else p["psum_partitions"]
    if parts > limit or parts < 1:
        raise t.error(
            "partition-size",
            f"tile {list(shape)}: partition dimension {parts} is over the "
            f"{limit} partitions of {space.upper()} (nl.tile_size.pmax)",
            src,
        )
    free = math.prod([s for i, s in enumerate(shape) if i != par]) if len(shape) > 1 else 1
    nbytes = free * dtype.itemsize
    if space == "psum":
        block = (
            math.prod(shape[par + 1 :]) * dtype.itemsize if par + 1 < len(shape) else dtype.itemsize
        )
        bank = p["psum_bank_bytes"]
        if block > bank:
            raise t.error(
                "psum-tile-size",
                f"PSUM tile {list(shape)} {dtype} needs {block} bytes per partition, over a "
                f"PSUM bank's {bank} (2 KiB: 512 fp32 values)",
                src,
            )
        if nbytes > bank and bank % block:
            raise t.error(
                "psum-tile-size",
                f"PSUM tiles of {block} bytes do not pack into {bank}-byte banks",
                src,
            )
    buf = t.new_buffer(name or f"tile@{t.sources[src]}", space, shape, dtype, parts, nbytes, src)
    buf.zero_init = zero
    return Tensor.whole(buf, dtype, shape, par)


def new_hbm(shape, dtype, name=None, host_array=None) -> Tensor:
    """An HBM tensor of the kernel (argument, output or scratch), allocated now."""
    from neuronsim.nki import _runner

    t = _trace.current()
    src = t.source_id()
    shape = tuple(int(s) for s in shape)
    dtype = as_dtype(dtype)
    device_name(dtype)
    nbytes = math.prod(shape) * dtype.itemsize if shape else dtype.itemsize
    buf = t.new_buffer(name or f"hbm@{t.sources[src]}", "hbm", shape, dtype, 1, nbytes, src)
    _runner.place_hbm(t, buf, host_array)
    return Tensor.whole(buf, dtype, shape)


# ---- emission ----
def emit(
    opcode,
    dst,
    src0=None,
    src1=None,
    src2=None,
    acc=None,
    op0=None,
    op1=None,
    engine=None,
    fields=None,
    accumulate=0,
    mask=None,
    producer=True,
):
    t = _trace.current()
    rec = _trace.OpRecord(opcode, t.source_id())
    rec.dst, rec.src0, rec.src1, rec.src2, rec.acc = dst, src0, src1, src2, acc
    rec.op0, rec.op1 = op0, op1
    rec.engine = engine
    rec.fields = fields or {}
    rec.accumulate = accumulate
    rec.mask = mask
    check_spaces(t, rec)
    t.add_op(rec)
    if (
        producer
        and dst is not None
        and dst.producer is None
        and not dst.buf.writers[:-1]
        and not dst.buf.readers
    ):
        dst.producer = rec
    return rec


_ENGINE_SPACES = {
    "dma_copy": ("hbm", "sbuf"),
    "matmul": ("sbuf", "psum"),
    "transpose": ("sbuf", "psum"),
}


def check_spaces(t, rec):
    """Data movements the hardware (and the NKI documentation) do not allow."""
    op = rec.opcode
    if op == "dma_copy":
        for x, what in ((rec.dst, "destination"), (rec.src0, "source")):
            if x.buf.space == "psum":
                raise t.error(
                    "data-movement",
                    f"DMA cannot access PSUM ({what} {x.buf.name}): copy the tile to "
                    "SBUF with nl.copy / nisa.tensor_copy first",
                    rec.source,
                )
        return
    if op in ("matmul", "transpose"):
        for x in (rec.src0, rec.src1):
            if x is not None and x.buf.space != "sbuf":
                raise t.error(
                    "data-movement",
                    f"TensorE reads its inputs from SBUF; {x.buf.name} is in "
                    f"{x.buf.space.upper()}",
                    rec.source,
                )
        if rec.dst.buf.space != "psum":
            raise t.error(
                "data-movement",
                f"TensorE writes PSUM; {rec.dst.buf.name} is in " f"{rec.dst.buf.space.upper()}",
                rec.source,
            )
        return
    for x in rec.operands():
        if x.buf.space == "hbm":
            raise t.error(
                "data-movement",
                f"compute engines read and write SBUF/PSUM only; {x.buf.name} is in "
                "HBM: nl.load it first (or nl.store the result)",
                rec.source,
            )
    if rec.engine == "gpsimd":
        for x in rec.operands():
            if x.buf.space == "psum":
                raise t.error("data-movement", "GpSimdE cannot access PSUM", rec.source)


def same_view(a: Tensor, b: Tensor) -> bool:
    return (
        a.buf is b.buf
        and a.shape == b.shape
        and a.axes == b.axes
        and a.part.const == b.part.const
        and a.part.loops == b.part.loops
        and a.off.const == b.off.const
        and a.off.loops == b.off.loops
    )


def _shapes_compatible(target: Tensor, value: Tensor) -> bool:
    if target.shape == value.shape:
        return True
    return target.partitions == value.partitions and target.free_size() == value.free_size()


def retarget(target: Tensor, value: Tensor, accumulate=False) -> bool:
    """Writes `value`'s producing instruction straight into `target` when `value` is a fresh
    temporary nothing else has read."""
    rec = value.producer
    if (
        rec is None
        or value.buf.space == "hbm"
        or value.buf.readers
        or value.buf.writers != [rec]
        or rec.dst is not value
    ):
        return False
    if rec.opcode in ("matmul", "transpose"):
        if target.buf.space != "psum":
            return False
    elif rec.opcode == "dma_copy":
        pass
    elif target.buf.space == "hbm":
        return False
    if not _shapes_compatible(target, value):
        return False
    t = _trace.current()
    value.buf.writers.remove(rec)
    value.buf.dropped = True
    rec.dst = target
    if accumulate:
        rec.accumulate = 1
        rec.iadd = True
    t.use(target.buf, rec, write=True)
    # The Python name of the temporary now refers to the target.
    value.buf, value.shape, value.axes = target.buf, target.shape, target.axes
    value.part, value.off, value.dtype = target.part, target.off, target.dtype
    value.producer = None
    return True


def assign(target: Tensor, value) -> None:
    t = _trace.current()
    if isinstance(value, Tensor):
        if same_view(target, value):
            return
        if retarget(target, value):
            return
        if not _shapes_compatible(target, value):
            value = broadcast_for(value, target.shape)
        copy(target, value)
        return
    if isinstance(value, int | float | np.number):
        memset(target, float(value))
        return
    raise t.error("index-type", f"cannot assign {type(value).__name__} to a tensor")


def broadcast_for(value: Tensor, shape) -> Tensor:
    t = _trace.current()
    vs = value.shape
    if len(vs) < len(shape):
        vs = (1,) * (len(shape) - len(vs)) + vs
        value = value.reshape(vs) if value.is_contiguous() else value
    try:
        return value.broadcast_to(shape)
    except Exception:
        raise t.error(
            "shape-mismatch", f"tile shapes {list(value.shape)} and {list(shape)} do not match"
        ) from None


def copy(dst: Tensor, src: Tensor, engine=None, mask=None) -> None:
    if dst.buf.space == "hbm" or src.buf.space == "hbm":
        if src.buf.space == "psum":
            tmp = new_tile(src.shape, src.dtype, "sbuf")
            emit("tensor_copy", tmp, src, engine="vector")
            src = tmp
        emit("dma_copy", dst, src, engine="dma", mask=mask)
        return
    emit("tensor_copy", dst, src, engine=engine or "vector", mask=mask)


def memset(dst: Tensor, value: float, engine=None, mask=None) -> None:
    emit("memset", dst, engine=engine or "vector", fields={"imm": float(value)}, mask=mask)


def accumulate(target: Tensor, value, op="add") -> Tensor:
    """``target += value``: a fresh matmul accumulates into PSUM; anything else is an ALU op
    reading and writing the target."""
    if isinstance(value, Tensor):
        if (
            value.producer is not None
            and value.producer.opcode == "matmul"
            and target.buf.space == "psum"
            and op == "add"
            and retarget(target, value, True)
        ):
            return target
        if not _shapes_compatible(target, value):
            value = broadcast_for(value, target.shape)
        rec = emit(
            "tensor_tensor",
            target,
            target,
            value,
            engine="vector",
            fields={"alu0": op},
            producer=False,
        )
    else:
        rec = emit(
            "tensor_scalar",
            target,
            target,
            engine="vector",
            fields={"alu0": op},
            op0=float(value),
            producer=False,
        )
    rec.iadd = True
    return target


def result_dtype_for_alu(dtype):
    return dtype


def is_float_dtype(dtype) -> bool:
    return is_float(dtype)
