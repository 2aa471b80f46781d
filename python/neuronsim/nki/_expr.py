"""Index arithmetic of NKI kernels: affine expressions over loop variables (``affine_range``
iterators, ``program_id``) and tile axes (``nl.arange``, ``nl.mgrid``), and the predicates masks
are made of.

An ``IndexExpr`` is ``const + sum(coef * loop_var) + sum(coef * i_d)`` where ``i_d`` walks axis
``d`` of the expression's (numpy-broadcast) ``shape``. Loop variables are symbolic while a legacy
kernel is traced once; everything else is an ordinary integer.
"""

from neuronsim.nki.errors import NkiError


def _error(rule: str, message: str) -> NkiError:
    """An error naming the kernel line being traced, if any."""
    from neuronsim.nki import _trace

    t = _trace.active()
    return t.error(rule, message) if t is not None else NkiError(rule, message)


def _merge(a: dict, b: dict, scale: int = 1) -> dict:
    out = dict(a)
    for k, v in b.items():
        c = out.get(k, 0) + scale * v
        if c:
            out[k] = c
        else:
            out.pop(k, None)
    return out


class IndexExpr:
    __slots__ = ("const", "loops", "axes", "shape")

    def __init__(self, const=0, loops=None, axes=None, shape=()):
        self.const = const
        self.loops = loops or {}
        self.axes = axes or {}
        self.shape = tuple(shape)

    # ---- construction helpers ----
    @staticmethod
    def lift(x) -> "IndexExpr":
        if isinstance(x, IndexExpr):
            return x
        if isinstance(x, bool):
            raise _error("index-type", "a boolean is not an index")
        try:
            return IndexExpr(int(x))
        except (TypeError, ValueError):
            raise _error("index-type", f"{x!r} is not an integer index") from None

    def is_scalar(self) -> bool:
        return not self.shape

    def is_constant(self) -> bool:
        return not self.loops and not self.axes

    def value(self) -> int:
        """The integer value; only for expressions with no loop variable or axis."""
        if not self.is_constant():
            raise _error(
                "symbolic-index",
                "an affine_range/sequential_range index is symbolic while the kernel is traced "
                "(the loop body is traced once): use it in index arithmetic or masks, or loop "
                "with nl.static_range / range for a Python value",
            )
        return self.const

    def _broadcast(self, other: "IndexExpr"):
        """Aligns the axes of two expressions as numpy broadcasting does (trailing axes)."""
        n = max(len(self.shape), len(other.shape))
        da, db = n - len(self.shape), n - len(other.shape)
        sa = (1,) * da + self.shape
        sb = (1,) * db + other.shape
        shape = []
        for x, y in zip(sa, sb, strict=False):
            if x != y and x != 1 and y != 1:
                raise _error(
                    "shape-mismatch",
                    f"index shapes {self.shape} and {other.shape} do not broadcast",
                )
            shape.append(max(x, y))
        axa = {d + da: c for d, c in self.axes.items()}
        axb = {d + db: c for d, c in other.axes.items()}
        return axa, axb, tuple(shape)

    # ---- arithmetic ----
    def __add__(self, other):
        if type(other) is int:  # the common case: constant offsets
            return IndexExpr(self.const + other, dict(self.loops), dict(self.axes), self.shape)
        o = IndexExpr.lift(other)
        if self.shape == o.shape:
            return IndexExpr(
                self.const + o.const,
                _merge(self.loops, o.loops),
                _merge(self.axes, o.axes),
                self.shape,
            )
        axa, axb, shape = self._broadcast(o)
        return IndexExpr(self.const + o.const, _merge(self.loops, o.loops), _merge(axa, axb), shape)

    __radd__ = __add__

    def __neg__(self):
        return IndexExpr(
            -self.const,
            {k: -v for k, v in self.loops.items()},
            {k: -v for k, v in self.axes.items()},
            self.shape,
        )

    def __sub__(self, other):
        return self + (-IndexExpr.lift(other))

    def __rsub__(self, other):
        return IndexExpr.lift(other) + (-self)

    def __mul__(self, other):
        o = IndexExpr(other) if type(other) is int else IndexExpr.lift(other)
        if not o.is_constant():
            if self.is_constant():
                return o * self.const
            raise _error("index-type", "the product of two indices is not affine")
        k = o.const
        if k == 0:
            return IndexExpr(0, shape=self.shape)
        return IndexExpr(
            self.const * k,
            {a: v * k for a, v in self.loops.items()},
            {a: v * k for a, v in self.axes.items()},
            self.shape,
        )

    __rmul__ = __mul__

    def __floordiv__(self, other):
        k = IndexExpr.lift(other).value()
        if self.is_constant():
            return IndexExpr(self.const // k)
        if (
            all(v % k == 0 for v in self.loops.values())
            and all(v % k == 0 for v in self.axes.values())
            and self.const % k == 0
        ):
            return IndexExpr(
                self.const // k,
                {a: v // k for a, v in self.loops.items()},
                {a: v // k for a, v in self.axes.items()},
                self.shape,
            )
        raise _error("index-type", "an index divided by a constant must stay affine")

    def __mod__(self, other):
        k = IndexExpr.lift(other).value()
        return IndexExpr(self.value() % k)

    # Python ints where one is needed (range(n), shapes): only constants have one.
    def __index__(self):
        return self.value()

    __int__ = __index__

    def __bool__(self):
        return bool(self.value())

    def __hash__(self):
        return id(self)

    # ---- comparisons: predicates for mask= ----
    def _cmp(self, other, op):
        return Predicate([(self - IndexExpr.lift(other), op)])

    def __lt__(self, o):
        return self._cmp(o, "<")

    def __le__(self, o):
        return self._cmp(o, "<=")

    def __gt__(self, o):
        return self._cmp(o, ">")

    def __ge__(self, o):
        return self._cmp(o, ">=")

    def __eq__(self, o):
        if (
            isinstance(o, IndexExpr | int)
            and self.is_constant()
            and IndexExpr.lift(o).is_constant()
        ):
            return self.const == IndexExpr.lift(o).const
        return Predicate([(self - IndexExpr.lift(o), "==")])

    def __ne__(self, o):
        r = self.__eq__(o)
        return (not r) if isinstance(r, bool) else NotImplemented

    # ---- axis manipulation (nl.arange(n)[:, None]) ----
    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        dims = []
        src = 0
        for k in key:
            if k is None:
                dims.append(None)
            elif isinstance(k, slice) and k == slice(None):
                dims.append(src)
                src += 1
            else:
                raise _error("index-type", "an arange index takes only [:, None] style keys")
        while src < len(self.shape):
            dims.append(src)
            src += 1
        new_shape, axes = [], {}
        for pos, d in enumerate(dims):
            if d is None:
                new_shape.append(1)
            else:
                new_shape.append(self.shape[d])
                if d in self.axes:
                    axes[pos] = self.axes[d]
        return IndexExpr(self.const, dict(self.loops), axes, tuple(new_shape))

    def __repr__(self):
        parts = [str(self.const)] if self.const else []
        parts += [f"{v}*v{k}" for k, v in self.loops.items()]
        parts += [f"{v}*i{k}" for k, v in self.axes.items()]
        return f"IndexExpr({' + '.join(parts) or '0'}, shape={self.shape})"


class LoopVar(IndexExpr):
    """The index of an affine_range/sequential_range loop (or a program id) while tracing."""

    __slots__ = ()

    def __init__(self, var: int):
        super().__init__(0, {var: 1})


class Predicate:
    """A conjunction of affine comparisons ``expr op 0`` (``op`` in <, <=, >, >=, ==)."""

    __slots__ = ("atoms",)

    def __init__(self, atoms):
        self.atoms = list(atoms)

    def __and__(self, other):
        if not isinstance(other, Predicate):
            raise _error("mask", "masks combine with & only")
        return Predicate(self.atoms + other.atoms)

    __rand__ = __and__

    def __bool__(self):
        raise _error(
            "symbolic-index",
            "a comparison of loop indices is symbolic while the kernel is traced: use it as a "
            "mask=, not in a Python if",
        )


class MGrid:
    """``nl.mgrid[0:128, 0:512]``: one index per axis, ``.p`` the partition index, ``.x`` ``.y``
    ``.z`` the free ones."""

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        n = len(key)
        exprs = []
        for d, k in enumerate(key):
            if not isinstance(k, slice):
                raise _error("index-type", "nl.mgrid takes slices")
            start = 0 if k.start is None else int(k.start)
            step = 1 if k.step is None else int(k.step)
            size = len(range(start, int(k.stop), step))
            shape = tuple(size if i == d else 1 for i in range(n))
            exprs.append(IndexExpr(start, {}, {d: step}, shape))
        return MGridResult(exprs)


class MGridResult(tuple):
    """The indices of an mgrid: a tuple (unpacks as ``i_p, i_f = nl.mgrid[...]``) with names."""

    def __new__(cls, exprs):
        return super().__new__(cls, exprs)

    @property
    def p(self):
        return self[0]

    @property
    def x(self):
        return self[1]

    @property
    def y(self):
        return self[2]

    @property
    def z(self):
        return self[3]


def arange(*args) -> IndexExpr:
    """``nl.arange(n)`` / ``nl.arange(start, stop[, step])``: a 1-D index over a tile axis."""
    r = range(*[IndexExpr.lift(a).value() for a in args])
    return IndexExpr(r.start, {}, {0: r.step}, (len(r),))
