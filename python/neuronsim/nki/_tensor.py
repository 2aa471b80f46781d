"""NKI tensors: HBM tensors and SBUF/PSUM tiles, and views of them from indexing.

A view is a buffer plus, per logical axis, how the axis moves the partition index (``pcoef``,
on-chip tiles only) and the element offset (``stride``), with affine bases ``part`` and ``off``
(in the loop variables). An operand of an instruction is a view whose axis 0 is the partition
axis (``pcoef`` 1 on chip; any stride in HBM).
"""

import math

from neuronsim.nki import _trace
from neuronsim.nki._dtypes import as_dtype, device_name
from neuronsim.nki._expr import IndexExpr
from neuronsim.nki.errors import NkiError


class ParDim(int):
    """``nl.par_dim(n)``: marks the partition axis of a tile shape (after block axes)."""


def _err(rule, msg):
    t = _trace.active()
    return t.error(rule, msg) if t is not None else NkiError(rule, msg)


def _affine(e: IndexExpr):
    return e.const, tuple(e.loops.items())


class Tensor:
    __slots__ = ("buf", "dtype", "shape", "axes", "part", "off", "producer", "__weakref__")

    def __init__(self, buf, dtype, shape, axes, part=None, off=None, producer=None):
        self.buf = buf
        self.dtype = as_dtype(dtype)
        self.shape = tuple(int(s) for s in shape)
        self.axes = axes  # [(pcoef, stride)] per logical axis
        self.part = part if part is not None else IndexExpr(0)
        self.off = off if off is not None else IndexExpr(0)
        self.producer = producer

    # ---- construction ----
    @staticmethod
    def whole(buf, dtype, shape, par_axis=0):
        """A view of a whole buffer: HBM row-major, or a tile with its partition axis."""
        shape = tuple(int(s) for s in shape)
        axes = []
        if buf.space == "hbm":
            stride = 1
            for s in reversed(shape):
                axes.append((0, stride))
                stride *= s
            axes.reverse()
        else:
            stride = 1
            rev = []
            for i in reversed(range(len(shape))):
                if i == par_axis:
                    rev.append((1, 0))
                else:
                    rev.append((0, stride))
                    stride *= shape[i]
            axes = list(reversed(rev))
        return Tensor(buf, dtype, shape, axes)

    # ---- numpy-like attributes ----
    @property
    def ndim(self):
        return len(self.shape)

    @property
    def buffer(self):
        from neuronsim.nki import language_common as lc

        return lc.buffer_of(self.buf.space)

    @property
    def itemsize(self):
        return self.dtype.itemsize

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return f"<nki tensor {self.buf.name} {list(self.shape)} {self.dtype} in {self.buf.space}>"

    # ---- indexing ----
    def _normalise_key(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        n_ell = sum(1 for k in key if k is Ellipsis)
        if n_ell > 1:
            raise _err("index-type", "at most one ... in an index")
        if n_ell:
            i = next(j for j, k in enumerate(key) if k is Ellipsis)
            fill = len(self.shape) - (len(key) - 1)
            key = key[:i] + (slice(None),) * fill + key[i + 1 :]
        if len(key) > len(self.shape):
            raise _err("index-type", f"{len(key)} indices for a tensor of {len(self.shape)} axes")
        return key + (slice(None),) * (len(self.shape) - len(key))

    def __getitem__(self, key):
        key = self._normalise_key(key)
        part, off = self.part, self.off
        advanced = [k for k in key if isinstance(k, IndexExpr) and not k.is_scalar()]
        out_shape, out_axes = [], []
        if advanced:
            n = max(len(e.shape) for e in advanced)
            shape = [1] * n
            for e in advanced:
                for d, s in enumerate(e.shape):
                    dd = d + n - len(e.shape)
                    if s != 1:
                        if shape[dd] not in (1, s):
                            raise _err("shape-mismatch", "index shapes do not broadcast")
                        shape[dd] = s
            axes = [[0, 0] for _ in range(n)]
            for k, (pc, st), size in zip(key, self.axes, self.shape, strict=False):
                if isinstance(k, slice):
                    if k != slice(None) or size != 1:
                        raise _err(
                            "index-type",
                            "slices and nl.arange indices cannot be mixed in one access",
                        )
                    continue
                e = IndexExpr.lift(k)
                base = IndexExpr(e.const, e.loops)
                part = part + base * pc if pc else part
                off = off + base * st if st else off
                shift = n - len(e.shape)
                for d, c in e.axes.items():
                    axes[d + shift][0] += pc * c
                    axes[d + shift][1] += st * c
            out_shape = shape
            out_axes = [tuple(a) for a in axes]
        else:
            for k, (pc, st), size in zip(key, self.axes, self.shape, strict=False):
                if type(k) is int:  # fast path: a constant index
                    k = k + size if k < 0 else k
                    if pc:
                        part = part + k * pc
                    if st:
                        off = off + k * st
                    continue
                if (
                    isinstance(k, slice)
                    and type(k.start) in (int, type(None))
                    and type(k.stop) in (int, type(None))
                    and k.step in (None, 1)
                ):
                    start = 0 if k.start is None else (k.start + size if k.start < 0 else k.start)
                    stop = size if k.stop is None else (k.stop + size if k.stop < 0 else k.stop)
                    if pc:
                        part = part + start * pc
                    if st:
                        off = off + start * st
                    out_shape.append(max(0, stop - start))
                    out_axes.append((pc, st))
                    continue
                if isinstance(k, slice):
                    start = 0 if k.start is None else k.start
                    step = 1 if k.step is None else IndexExpr.lift(k.step).value()
                    stop = size if k.stop is None else k.stop
                    start_e = IndexExpr.lift(start)
                    if start_e.is_constant() and start_e.const < 0:
                        start_e = IndexExpr(start_e.const + size)
                    stop_e = IndexExpr.lift(stop)
                    if stop_e.is_constant() and stop_e.const < 0:
                        stop_e = IndexExpr(stop_e.const + size)
                    length = (stop_e - start_e).value()
                    count = max(0, -(-length // step)) if step > 0 else 0
                    part = part + start_e * pc if pc else part
                    off = off + start_e * st if st else off
                    out_shape.append(count)
                    out_axes.append((pc * step, st * step))
                else:
                    e = IndexExpr.lift(k)
                    if e.is_constant() and e.const < 0:
                        e = IndexExpr(e.const + size)
                    part = part + e * pc if pc else part
                    off = off + e * st if st else off
        return Tensor(self.buf, self.dtype, out_shape, out_axes, part, off)

    def __setitem__(self, key, value):
        from neuronsim.nki import _ops

        _ops.assign(self[key], value)

    # ---- views ----
    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], tuple | list):
            shape = tuple(shape[0])
        shape = tuple(int(s) for s in shape)
        if -1 in shape:
            known = math.prod([s for s in shape if s != -1])
            shape = tuple(math.prod(self.shape) // known if s == -1 else s for s in shape)
        if math.prod(shape) != math.prod(self.shape):
            raise _err("shape-mismatch", f"cannot reshape {list(self.shape)} to {list(shape)}")
        if self.buf.space != "hbm" or not self.is_contiguous():
            # A tile keeps its partition axis; reshape the free axes.
            if self.buf.space != "hbm" and shape[0] == self.shape[0] and self.is_contiguous_free():
                t = Tensor.whole(self.buf, self.dtype, shape)
                return Tensor(self.buf, self.dtype, shape, t.axes, self.part, self.off)
            raise _err("view", "only a contiguous tensor can be reshaped")
        t = Tensor.whole(self.buf, self.dtype, shape)
        return Tensor(self.buf, self.dtype, shape, t.axes, self.part, self.off)

    def is_contiguous(self):
        stride = 1
        for (pc, st), s in reversed(list(zip(self.axes, self.shape, strict=False))):
            if s == 1:
                continue
            if pc or st != stride:
                return False
            stride *= s
        return True

    def is_contiguous_free(self):
        stride = 1
        for (pc, st), s in reversed(list(zip(self.axes[1:], self.shape[1:], strict=False))):
            if s == 1:
                continue
            if pc or st != stride:
                return False
            stride *= s
        return True

    def broadcast_to(self, shape):
        shape = tuple(int(s) for s in shape)
        if (
            self.buf.space != "hbm"
            and self.shape
            and self.shape[0] == 1
            and shape
            and shape[0] > 1
            and len(shape) == len(self.shape)
        ):
            # Along partitions: copied onto every partition (a TensorE matmul with ones).
            from neuronsim.nki import language_common as lc

            x = lc.partition_broadcast(self, shape[0])
            return x if x.shape == shape else x.broadcast_to(shape)
        if len(shape) != len(self.shape):
            raise _err("shape-mismatch", f"cannot broadcast {list(self.shape)} to {list(shape)}")
        axes = []
        for (pc, st), s, t in zip(self.axes, self.shape, shape, strict=False):
            if s == t:
                axes.append((pc, st))
            elif s == 1:
                axes.append((0, 0))
            else:
                raise _err(
                    "shape-mismatch", f"cannot broadcast {list(self.shape)} to {list(shape)}"
                )
        if axes and self.buf.space != "hbm" and axes[0] == (0, 0) and shape[0] != 1:
            raise _err(
                "partition-broadcast",
                "a tile cannot be broadcast along its partition axis on an engine",
            )
        return Tensor(self.buf, self.dtype, shape, axes, self.part, self.off)

    def ap(self, pattern, offset=0, dtype=None):
        """Current-generation access pattern: ``[[stride, size], ...]`` partition first."""
        pattern = [(int(s), int(n)) for s, n in pattern]
        axes, shape = [], []
        for i, (st, n) in enumerate(pattern):
            shape.append(n)
            if self.buf.space != "hbm" and i == 0:
                axes.append((1, 0) if st else (0, 0))
            else:
                axes.append((0, st))
        return Tensor(
            self.buf, dtype or self.dtype, shape, axes, self.part, self.off + IndexExpr.lift(offset)
        )

    @property
    def T(self):  # noqa: N802
        from neuronsim.nki import language_common as lc

        return lc.transpose(self)

    # ---- as an instruction operand ----
    def operand(self):
        """The C++ operand tuple (kernels/nki/kernel_ir.h Operand)."""
        b = self.buf
        if not self.shape:
            shape, axes = (1,), [(1, 0) if b.space != "hbm" else (0, 1)]
        else:
            shape, axes = self.shape, self.axes
        if b.space == "hbm":
            if any(pc for pc, _ in axes):
                raise _err("view", "bad HBM view")
            pstride = axes[0][1]
        else:
            # A whole multi-block tile (block axes before nl.par_dim): partition axis first.
            j = next((i for i, a in enumerate(axes) if a[0]), 0)
            if j > 0 and axes[j] == (1, 0):
                axes = [axes[j]] + list(axes[:j]) + list(axes[j + 1 :])
                shape = (shape[j],) + tuple(shape[:j]) + tuple(shape[j + 1 :])
            if axes[0] not in ((1, 0),) and not (shape[0] == 1 and axes[0][1] == 0):
                raise _err(
                    "partition-axis",
                    f"{b.name}: the first axis of a tile access must be its partition axis",
                )
            if any(pc for pc, _ in axes[1:]):
                raise _err(
                    "partition-axis",
                    f"{b.name}: only the first axis of an access may index partitions",
                )
            pstride = 0
        dims = tuple((st, n) for (_, st), n in zip(axes[1:], shape[1:], strict=False))
        pc, pt = _affine(self.part)
        oc, ot = _affine(self.off)
        return (b.id, device_name(self.dtype), pc, pt, int(shape[0]), pstride, oc, ot, dims)

    @property
    def partitions(self):
        return self.shape[0] if self.shape else 1

    def free_size(self):
        return math.prod(self.shape[1:]) if len(self.shape) > 1 else 1

    # ---- arithmetic: the nl functions ----
    def _bin(self, other, op, reverse=False):
        from neuronsim.nki import language_common as lc

        return lc.binary(op, other, self) if reverse else lc.binary(op, self, other)

    def __add__(self, o):
        return self._bin(o, "add")

    def __radd__(self, o):
        return self._bin(o, "add", True)

    def __sub__(self, o):
        return self._bin(o, "subtract")

    def __rsub__(self, o):
        return self._bin(o, "subtract", True)

    def __mul__(self, o):
        return self._bin(o, "multiply")

    def __rmul__(self, o):
        return self._bin(o, "multiply", True)

    def __truediv__(self, o):
        return self._bin(o, "divide")

    def __rtruediv__(self, o):
        return self._bin(o, "divide", True)

    def __pow__(self, o):
        return self._bin(o, "pow")

    def __neg__(self):
        return self._bin(-1.0, "multiply")

    def __lt__(self, o):
        return self._bin(o, "is_lt")

    def __le__(self, o):
        return self._bin(o, "is_le")

    def __gt__(self, o):
        return self._bin(o, "is_gt")

    def __ge__(self, o):
        return self._bin(o, "is_ge")

    def __iadd__(self, o):
        from neuronsim.nki import _ops

        return _ops.accumulate(self, o, "add")

    def __isub__(self, o):
        from neuronsim.nki import _ops

        return _ops.accumulate(self, o, "subtract")

    def __imul__(self, o):
        from neuronsim.nki import _ops

        return _ops.accumulate(self, o, "multiply")

    def __hash__(self):
        return id(self)

    # numpy ufuncs (np.add(a, b), np.exp(t)) on tiles become the engines' ops.
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from neuronsim.nki import language_common as lc

        if method != "__call__":
            return NotImplemented
        return lc.ufunc(ufunc, *inputs, **kwargs)
