"""``nki.language`` as both generations share it: tensor creation, indexing helpers, loops,
loads and stores, and the math functions, each lowered to one or a few ISA instructions (which
engine does what follows the NKI ISA: ScalarE for activation functions, VectorE for ALU ops and
reductions, TensorE for matmul and transpose, DMA queues for data movement)."""

import builtins
import math

import numpy as np

from neuronsim.nki import _dtypes, _ops, _trace
from neuronsim.nki._expr import IndexExpr, LoopVar, MGrid, Predicate, arange  # noqa: F401
from neuronsim.nki._tensor import ParDim, Tensor

# ---- data types ----
float32 = _dtypes.float32
float16 = _dtypes.float16
bfloat16 = _dtypes.bfloat16
tfloat32 = _dtypes.tfloat32
float8_e4m3 = _dtypes.float8_e4m3
float8_e5m2 = _dtypes.float8_e5m2
int32 = _dtypes.int32
int16 = _dtypes.int16
int8 = _dtypes.int8
uint8 = _dtypes.uint8
bool_ = _dtypes.bool_


# ---- buffers ----
class _BufferKind:
    def __init__(self, name, space):
        self.name = name
        self.space = space

    def __repr__(self):
        return f"nl.{self.name}"

    def view(self, dtype, shape):  # nl.sbuf.view(dtype, shape) (legacy allocation API)
        return ndarray(shape, dtype, buffer=self)


sbuf = _BufferKind("sbuf", "sbuf")
psum = _BufferKind("psum", "psum")
hbm = _BufferKind("hbm", "hbm")
shared_hbm = _BufferKind("shared_hbm", "hbm")
private_hbm = _BufferKind("private_hbm", "hbm")


def buffer_of(space):
    return {"sbuf": sbuf, "psum": psum}.get(space, shared_hbm)


def _space(buffer) -> str:
    if buffer is None:
        return "sbuf"
    if isinstance(buffer, _BufferKind):
        return buffer.space
    space = getattr(buffer, "space", None)  # nki.compiler allocation objects
    if space is not None:
        return space
    raise _trace.current().error("memory-space", f"unknown buffer {buffer!r}")


class _TileSize:
    """nl.tile_size: the tile limits, from the preset in force."""

    @property
    def pmax(self):
        return _ops.params()["sbuf_partitions"]

    @property
    def psum_partition(self):
        return _ops.params()["psum_partitions"]

    @property
    def psum_fmax(self):
        return _ops.params()["psum_bank_bytes"] // 4

    @property
    def gemm_stationary_fmax(self):
        return _ops.params()["tensor_columns"]

    @property
    def gemm_moving_fmax(self):
        return _ops.params()["moving_free_max"]

    # The NKI ISA's bn_stats input limit (nki.isa.bn_stats documentation).
    bn_stats_fmax = 512
    total_available_sbuf_size = property(lambda self: _ops.params()["sbuf_partition_bytes"])


tile_size = _TileSize()


def par_dim(n):
    return ParDim(int(n))


# ---- tensor creation ----
def ndarray(shape, dtype, buffer=None, name="", **kwargs):
    if isinstance(shape, int):
        shape = (shape,)
    space = _space(buffer)
    if space == "hbm":
        return _ops.new_hbm(shape, dtype, name or None)
    return _ops.new_tile(shape, dtype, space, name or None)


def empty_like(x, dtype=None, buffer=None, name="", **kwargs):
    return ndarray(
        x.shape,
        dtype or x.dtype,
        buffer=buffer if buffer is not None else buffer_of(x.buf.space),
        name=name,
    )


def zeros(shape, dtype, buffer=None, name="", **kwargs):
    return full(shape, 0.0, dtype, buffer=buffer, name=name, _zero=True)


def ones(shape, dtype, buffer=None, name="", **kwargs):
    return full(shape, 1.0, dtype, buffer=buffer, name=name)


def full(shape, fill_value, dtype, buffer=None, name="", _zero=False, **kwargs):
    t = ndarray(shape, dtype, buffer=buffer, name=name)
    if t.buf.space == "hbm":
        raise _trace.current().error("memory-space", "nl.zeros/full create on-chip tiles")
    t.buf.zero_init = _zero
    _ops.memset(t, float(fill_value))
    return t


def zeros_like(x, dtype=None, buffer=None, name=""):
    return zeros(x.shape, dtype or x.dtype, buffer=buffer or buffer_of(x.buf.space), name=name)


def ds(start, size):
    """``nl.ds(start, size)``: the slice ``start:start + size`` (start may be a loop index)."""
    return slice(start, IndexExpr.lift(start) + size)


mgrid = MGrid()


# ---- loops ----
class _Range:
    def __init__(self, kind, args):
        self.kind = kind
        self.args = args

    def __iter__(self):
        t = _trace.active()
        if self.kind == "static" or t is None or t.generation == "current":
            return iter(range(*[IndexExpr.lift(a).value() for a in self.args]))
        return self._symbolic(t)

    def _symbolic(self, t):
        r = range(*[IndexExpr.lift(a).value() for a in self.args])
        var = t.open_loop(len(r), self.kind)
        try:
            yield LoopVar(var) * r.step + r.start if (r.step, r.start) != (1, 0) else LoopVar(var)
        finally:
            t.close_loop()

    def __len__(self):
        return len(range(*[IndexExpr.lift(a).value() for a in self.args]))


def affine_range(*args, **kwargs):
    return _Range("affine", args)


def sequential_range(*args, **kwargs):
    return _Range("sequential", args)


def static_range(*args, **kwargs):
    return _Range("static", args)


# ---- SPMD ----
class _NC:
    def __init__(self, n):
        self.n = int(n)


def nc(n):
    return _NC(n)


class SpmdDim:
    """``nl.spmd_dim(n, nl.nc(2))``: n instances per physical core of the logical core."""

    def __init__(self, *dims):
        self.dims = dims

    @property
    def size(self):
        n = 1
        for d in self.dims:
            n *= d.n if isinstance(d, _NC) else int(d)
        return n


def spmd_dim(*dims):
    return SpmdDim(*dims)


def program_id(axis=0):
    t = _trace.current()
    ids = getattr(t, "program_ids", None)
    if not ids or axis >= len(ids):
        return 0
    return ids[axis]


def num_programs(axes=None):
    t = _trace.current()
    sizes = getattr(t, "grid_sizes", ())
    if axes is None:
        n = 1
        for s in sizes:
            n *= s
        return n
    if isinstance(axes, tuple | list):
        n = 1
        for a in axes:
            n *= sizes[a] if a < len(sizes) else 1
        return n
    return sizes[axes] if axes < len(sizes) else 1


def program_ndim():
    return len(getattr(_trace.current(), "grid_sizes", ()))


# ---- data movement ----
def _check_tile_shape(t, view, what):
    p = _ops.params()
    if view.shape and view.shape[0] > p["sbuf_partitions"]:
        raise t.error(
            "partition-size",
            f"{what} of shape {list(view.shape)}: partition dimension "
            f"{view.shape[0]} is over {p['sbuf_partitions']} (nl.tile_size.pmax)",
        )


def load(src, dtype=None, mask=None, **kwargs):
    t = _trace.current()
    if not isinstance(src, Tensor):
        raise t.error("index-type", "nl.load takes an HBM tensor")
    if src.buf.space != "hbm":
        raise t.error(
            "data-movement", f"nl.load reads HBM; {src.buf.name} is in {src.buf.space.upper()}"
        )
    _check_tile_shape(t, src, "nl.load")
    dst = _ops.new_tile(src.shape, dtype or src.dtype, "sbuf")
    _ops.emit("dma_copy", dst, src, engine="dma", mask=mask)
    return dst


def store(dst, value, mask=None, **kwargs):
    t = _trace.current()
    if not isinstance(dst, Tensor) or dst.buf.space != "hbm":
        raise t.error("data-movement", "nl.store writes an HBM tensor")
    if not isinstance(value, Tensor):
        raise t.error("index-type", "nl.store stores a tile")
    if value.shape != dst.shape:
        if value.partitions != dst.partitions or value.free_size() != dst.free_size():
            value = _ops.broadcast_for(value, dst.shape)
    if value.buf.space == "psum":
        raise t.error(
            "data-movement",
            f"nl.store cannot read PSUM ({value.buf.name}): DMA reaches HBM and SBUF "
            "only; copy the tile to SBUF first (nl.copy)",
        )
    _ops.emit("dma_copy", dst, value, engine="dma", mask=mask)


def load_transpose2d(src, dtype=None, mask=None, **kwargs):
    t = _trace.current()
    if src.buf.space != "hbm" or len(src.shape) != 2:
        raise t.error("data-movement", "nl.load_transpose2d reads a 2-D HBM tensor")
    view = Tensor(
        src.buf,
        src.dtype,
        (src.shape[1], src.shape[0]),
        [src.axes[1], src.axes[0]],
        src.part,
        src.off,
    )
    return load(view, dtype=dtype, mask=mask)


def copy(x, dtype=None, mask=None, buffer=None, **kwargs):
    t = _trace.current()
    dst = _ops.new_tile(x.shape, dtype or x.dtype, _space(buffer))
    if x.buf.space == "hbm":
        raise t.error("data-movement", "nl.copy copies tiles; use nl.load for HBM tensors")
    _ops.emit("tensor_copy", dst, x, engine="vector", mask=mask)
    return dst


def transpose(x, dtype=None, mask=None, **kwargs):
    """2-D tile transpose on TensorE (through PSUM, as nisa.nc_transpose)."""
    from neuronsim.nki import isa_common

    return isa_common.nc_transpose(x, dtype=dtype, mask=mask)


def broadcast_to(x, shape, **kwargs):
    return x.broadcast_to(shape)


def partition_broadcast(x, partitions):
    """A [1, ...] tile copied onto `partitions` partitions: ones[1, P] as the stationary and the
    row as the moving operand of TensorE matmuls (K = 1, exact), then PSUM -> SBUF."""
    t = _trace.current()
    if not _dtypes.is_float(x.dtype):
        raise t.error("dtype-support", "only float tiles broadcast along partitions")
    free = x.shape[1:]
    n = math.prod(free) if free else 1
    row = x.reshape((1, n)) if len(x.shape) != 2 else x
    ones = _ops.new_tile((1, partitions), x.dtype, "sbuf")
    _ops.memset(ones, 1.0)
    out = _ops.new_tile((partitions,) + tuple(free), x.dtype, "sbuf")
    flat = out.reshape((partitions, n)) if len(out.shape) != 2 else out
    step = _ops.params()["moving_free_max"]
    for c0 in range(0, n, step):
        c1 = builtins.min(n, c0 + step)
        ps = _ops.new_tile((partitions, c1 - c0), np.float32, "psum")
        _ops.emit("matmul", ps, ones, row[:, c0:c1], engine="tensor")
        _ops.emit("tensor_copy", flat[:, c0:c1], ps, engine="vector", producer=False)
    return out


def static_cast(x, dtype):
    return copy(x, dtype=dtype)


def device_print(prefix, x, **kwargs):
    """Accepted; the simulated device has no print queue (values are in the outputs)."""


# ---- arithmetic ----
# numpy functions and the nl functions name the same ALU operators.
_ALU = {
    "add": "add",
    "subtract": "subtract",
    "multiply": "multiply",
    "divide": "divide",
    "true_divide": "divide",
    "maximum": "max",
    "minimum": "min",
    "max": "max",
    "min": "min",
    "power": "pow",
    "pow": "pow",
    "mod": "mod",
    "remainder": "mod",
    "fmod": "mod",
    "equal": "is_equal",
    "not_equal": "not_equal",
    "greater": "is_gt",
    "greater_equal": "is_ge",
    "less": "is_lt",
    "less_equal": "is_le",
    "logical_and": "logical_and",
    "logical_or": "logical_or",
    "logical_xor": "logical_xor",
    "bitwise_and": "bitwise_and",
    "bitwise_or": "bitwise_or",
    "bitwise_xor": "bitwise_xor",
    "left_shift": "shift_left",
    "right_shift": "shift_right",
    "is_lt": "is_lt",
    "is_le": "is_le",
    "is_gt": "is_gt",
    "is_ge": "is_ge",
    "is_equal": "is_equal",
    "abs_max": "abs_max",
    "bypass": "bypass",
}

# Activation functions (ScalarE), by the name of the nl / numpy function.
_ACT = {
    "exp": "exp",
    "log": "log",
    "tanh": "tanh",
    "sigmoid": "sigmoid",
    "relu": "relu",
    "gelu": "gelu",
    "gelu_apprx_tanh": "gelu_tanh",
    "gelu_dx": "gelu_dx",
    "silu": "silu",
    "silu_dx": "silu_dx",
    "sqrt": "sqrt",
    "rsqrt": "rsqrt",
    "reciprocal": "reciprocal",
    "square": "square",
    "softplus": "softplus",
    "erf": "erf",
    "abs": "abs",
    "absolute": "abs",
    "sign": "sign",
    "sin": "sin",
    "cos": "cos",
    "mish": "mish",
    "copy": "copy",
    "identity": "copy",
}


def op_name(op) -> str:
    """The ALU operator or activation function an nl / numpy function (or name) stands for."""
    if isinstance(op, str):
        return op
    name = getattr(op, "__name__", None) or getattr(op, "name", None)
    if name is None:
        raise _trace.current().error("alu-op", f"{op!r} is not an NKI operator")
    return getattr(op, "_nki_name", name)


def alu_of(op) -> str:
    n = op_name(op)
    if n not in _ALU:
        raise _trace.current().error("alu-op", f"{n} is not an ALU operator of the engines")
    return _ALU[n]


def act_of(op) -> str:
    n = op_name(op)
    if n not in _ACT:
        raise _trace.current().error(
            "activation-function", f"{n} is not an activation function of ScalarE"
        )
    return _ACT[n]


def _is_scalar(x):
    return isinstance(x, int | float | np.number) and not isinstance(x, bool)


def _scalar_column(x: Tensor, parts) -> bool:
    """A [P, 1] tile in SBUF/PSUM: usable as a per-partition scalar operand."""
    return (
        isinstance(x, Tensor)
        and x.buf.space != "hbm"
        and x.partitions == parts
        and x.free_size() == 1
    )


def binary(op, x, y, dtype=None, mask=None, buffer=None, engine=None):
    t = _trace.current()
    alu = _ALU.get(op, op) if isinstance(op, str) else alu_of(op)
    if _is_scalar(x) and _is_scalar(y):
        raise t.error("index-type", "an NKI operation needs at least one tile")
    if _is_scalar(y) or _is_scalar(x):
        tile, s, rev = (x, y, False) if _is_scalar(y) else (y, x, True)
        out = _ops.new_tile(tile.shape, dtype or tile.dtype, _space(buffer))
        _ops.emit(
            "tensor_scalar",
            out,
            tile,
            op0=float(s),
            engine=engine or "vector",
            fields={"alu0": alu, "reverse0": rev},
            mask=mask,
        )
        return out
    for a in (x, y):
        if not isinstance(a, Tensor):
            raise t.error("index-type", f"{type(a).__name__} is not a tile")
        if a.buf.space == "hbm":
            raise t.error(
                "data-movement",
                f"{a.buf.name} is in HBM: engines compute on SBUF/PSUM tiles " "(nl.load it first)",
            )
    rdt = dtype or _dtypes.promote(x.dtype, y.dtype)
    # [P, 1] against [P, F]: the column is a per-partition scalar operand.
    if x.shape != y.shape and x.free_size() > 1 and _scalar_column(y, x.partitions):
        out = _ops.new_tile(x.shape, rdt, _space(buffer))
        _ops.emit(
            "tensor_scalar",
            out,
            x,
            op0=y,
            engine=engine or "vector",
            fields={"alu0": alu},
            mask=mask,
        )
        return out
    if x.shape != y.shape and y.free_size() > 1 and _scalar_column(x, y.partitions):
        out = _ops.new_tile(y.shape, rdt, _space(buffer))
        _ops.emit(
            "tensor_scalar",
            out,
            y,
            op0=x,
            engine=engine or "vector",
            fields={"alu0": alu, "reverse0": True},
            mask=mask,
        )
        return out
    try:
        shape = np.broadcast_shapes(x.shape, y.shape) if x.shape != y.shape else x.shape
    except ValueError:
        raise t.error(
            "shape-mismatch", f"tile shapes {list(x.shape)} and {list(y.shape)} do not match"
        ) from None
    xa = x if x.shape == shape else _ops.broadcast_for(x, shape)
    ya = y if y.shape == shape else _ops.broadcast_for(y, shape)
    if xa.buf.space == "psum" and ya.buf.space == "psum":
        raise t.error(
            "both-inputs-psum", "tensor_tensor cannot read both inputs from PSUM: copy one to SBUF"
        )
    out = _ops.new_tile(shape, rdt, _space(buffer))
    _ops.emit(
        "tensor_tensor", out, xa, ya, engine=engine or "vector", fields={"alu0": alu}, mask=mask
    )
    return out


def _make_binary(name):
    def fn(x, y, dtype=None, mask=None, **kwargs):
        return binary(name, x, y, dtype=dtype, mask=mask, buffer=kwargs.get("buffer"))

    fn.__name__ = name
    fn._nki_name = name
    return fn


add = _make_binary("add")
subtract = _make_binary("subtract")
multiply = _make_binary("multiply")
divide = _make_binary("divide")
maximum = _make_binary("maximum")
minimum = _make_binary("minimum")
power = _make_binary("power")
equal = _make_binary("equal")
not_equal = _make_binary("not_equal")
greater = _make_binary("greater")
greater_equal = _make_binary("greater_equal")
less = _make_binary("less")
less_equal = _make_binary("less_equal")
logical_and = _make_binary("logical_and")
logical_or = _make_binary("logical_or")
logical_xor = _make_binary("logical_xor")
bitwise_and = _make_binary("bitwise_and")
bitwise_or = _make_binary("bitwise_or")
bitwise_xor = _make_binary("bitwise_xor")
left_shift = _make_binary("left_shift")
right_shift = _make_binary("right_shift")
fmod = _make_binary("fmod")
mod = _make_binary("mod")


def activation(func, x, dtype=None, mask=None, scale=1.0, bias=None, buffer=None):
    t = _trace.current()
    if not isinstance(x, Tensor) or x.buf.space == "hbm":
        raise t.error("data-movement", "activation functions compute on SBUF/PSUM tiles")
    out = _ops.new_tile(x.shape, dtype or x.dtype, _space(buffer))
    _ops.emit(
        "activation",
        out,
        x,
        engine="scalar",
        fields={"func": func},
        op0=scale if not isinstance(scale, Tensor) else scale,
        op1=(0.0 if bias is None else bias),
        mask=mask,
    )
    return out


def _make_unary(name):
    func = _ACT[name]

    def fn(x, dtype=None, mask=None, **kwargs):
        return activation(func, x, dtype=dtype, mask=mask, buffer=kwargs.get("buffer"))

    fn.__name__ = name
    fn._nki_name = name
    return fn


exp = _make_unary("exp")
log = _make_unary("log")
tanh = _make_unary("tanh")
sigmoid = _make_unary("sigmoid")
relu = _make_unary("relu")
gelu = _make_unary("gelu")
gelu_apprx_tanh = _make_unary("gelu_apprx_tanh")
gelu_dx = _make_unary("gelu_dx")
silu = _make_unary("silu")
silu_dx = _make_unary("silu_dx")
sqrt = _make_unary("sqrt")
rsqrt = _make_unary("rsqrt")
square = _make_unary("square")
softplus = _make_unary("softplus")
erf = _make_unary("erf")
abs = _make_unary("abs")  # noqa: A001
sign = _make_unary("sign")
sin = _make_unary("sin")
cos = _make_unary("cos")
mish = _make_unary("mish")


def reciprocal(x, dtype=None, mask=None, **kwargs):
    """1/x on VectorE (nisa.reciprocal); ScalarE's table is nl.exp-class accurate only."""
    return binary("divide", 1.0, x, dtype=dtype, mask=mask)


def negative(x, dtype=None, mask=None, **kwargs):
    return binary("multiply", x, -1.0, dtype=dtype, mask=mask)


def _axes(x, axis):
    if axis is None:
        axis = tuple(range(1, len(x.shape)))
    if isinstance(axis, int):
        axis = (axis,)
    axis = tuple(a % len(x.shape) for a in axis)
    if 0 in axis:
        raise _trace.current().error(
            "partition-reduce",
            "reduction along the partition axis (axis 0): the engines reduce free axes; "
            "transpose the tile or reduce with a matmul against ones",
        )
    return axis


def reduce(op, x, axis, dtype=None, keepdims=False, mask=None, negate=False, buffer=None):
    t = _trace.current()
    if not isinstance(x, Tensor) or x.buf.space == "hbm":
        raise t.error("data-movement", "reductions compute on SBUF/PSUM tiles")
    axes = _axes(x, axis)
    keep = [i for i in range(1, len(x.shape)) if i not in axes]
    order = [0] + keep + list(axes)
    src = Tensor(
        x.buf, x.dtype, [x.shape[i] for i in order], [x.axes[i] for i in order], x.part, x.off
    )
    out_shape = (
        [x.shape[i] if i not in axes else 1 for i in range(len(x.shape))]
        if keepdims
        else [x.shape[i] for i in range(len(x.shape)) if i not in axes]
    )
    if len(out_shape) == 1:
        out_shape = out_shape + ([1] if keepdims else [])
    out = _ops.new_tile(out_shape or [x.shape[0]], dtype or x.dtype, _space(buffer))
    # The device folds the innermost free dims: pass the reduced axes merged into one.
    red = 1
    for a in axes:
        red *= x.shape[a]
    flat = _flatten_reduced(src, len(keep), red)
    fields = {"reduce": op, "reduce_axes": 1}
    _ops.emit("tensor_reduce", out, flat, engine="vector", fields=fields, mask=mask)
    if negate:
        _ops.emit(
            "tensor_scalar",
            out,
            out,
            op0=-1.0,
            engine="vector",
            fields={"alu0": "multiply"},
            producer=False,
        )
    return out


def _flatten_reduced(src: Tensor, nkeep: int, red: int) -> Tensor:
    """src [P, keep..., red...] with the reduced axes as one innermost axis when they walk
    memory evenly (else the view is kept and reduced one axis at a time by the caller)."""
    raxes = src.axes[1 + nkeep :]
    rshape = src.shape[1 + nkeep :]
    if len(raxes) <= 1:
        return src
    stride = raxes[-1][1]
    expect = stride
    for (pc, st), n in reversed(list(zip(raxes, rshape, strict=False))):
        if n == 1:
            continue
        if pc or st != expect:
            raise _trace.current().error(
                "reduce-axes", "reducing several axes that are not contiguous"
            )
        expect *= n
    return Tensor(
        src.buf,
        src.dtype,
        list(src.shape[: 1 + nkeep]) + [red],
        list(src.axes[: 1 + nkeep]) + [(0, stride)],
        src.part,
        src.off,
    )


def _make_reduce(name, op):
    def fn(x, axis, dtype=None, keepdims=False, mask=None, **kwargs):
        return reduce(op, x, axis, dtype=dtype, keepdims=keepdims, mask=mask)

    fn.__name__ = name
    fn._nki_name = name
    return fn


sum = _make_reduce("sum", "add")  # noqa: A001
max = _make_reduce("max", "max")  # noqa: A001
min = _make_reduce("min", "min")  # noqa: A001
prod = _make_reduce("prod", "multiply")


def mean(x, axis, dtype=None, keepdims=False, mask=None, **kwargs):
    axes = _axes(x, axis)
    n = 1
    for a in axes:
        n *= x.shape[a]
    s = reduce("add", x, axes, dtype=dtype or np.float32, keepdims=keepdims, mask=mask)
    _ops.emit(
        "tensor_scalar",
        s,
        s,
        op0=1.0 / n,
        engine="vector",
        fields={"alu0": "multiply"},
        producer=False,
    )
    return s


def where(condition, x, y, dtype=None, mask=None, **kwargs):
    t = _trace.current()
    if not isinstance(condition, Tensor):
        raise t.error("index-type", "nl.where takes a predicate tile")
    shape = condition.shape
    out = _ops.new_tile(shape, dtype or (x.dtype if isinstance(x, Tensor) else np.float32))
    if isinstance(y, Tensor):
        _ops.emit("select", out, condition, x, y, engine="vector", mask=mask)
    else:
        _ops.emit("select", out, condition, x, engine="vector", fields={"imm": float(y)}, mask=mask)
    return out


def matmul(x, y, transpose_x=False, mask=None, **kwargs):
    """x @ y into a new PSUM tile (fp32). transpose_x: x is given as [K, M] (the stationary
    layout); otherwise x [M, K] is transposed on TensorE first."""
    from neuronsim.nki import isa_common

    if not transpose_x:
        xt = isa_common.nc_transpose(x)
        xs = _ops.new_tile(xt.shape, x.dtype, "sbuf")
        _ops.emit("tensor_copy", xs, xt, engine="vector")
        x = xs
    return isa_common.nc_matmul(x, y, mask=mask)


def ufunc(uf, *inputs, **kwargs):
    """numpy ufuncs applied to tiles (np.add(a, b), np.exp(t))."""
    name = uf.__name__
    if uf.nin == 2:
        return binary(name, inputs[0], inputs[1], dtype=kwargs.get("dtype"))
    if name in _ACT:
        return activation(_ACT[name], inputs[0], dtype=kwargs.get("dtype"))
    if name == "negative":
        return negative(inputs[0])
    raise _trace.current().error("alu-op", f"numpy.{name} has no NKI engine equivalent")
