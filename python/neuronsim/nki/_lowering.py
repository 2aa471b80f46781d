"""A finished trace as the tuples ``neuronsim._C._nki_launch`` takes (kernels/nki/kernel_ir.h),
with the checks that need the whole kernel: tile lifetimes (where each tile is freed), loop-
carried dependences in ``affine_range``, masks as bounds on the tile axes, and the PSUM zeroing
a matmul's first write makes redundant."""

from neuronsim.nki._trace import SPACE_CODE
from neuronsim.nki.errors import NkiError

LOOP, END, ALLOC, FREE, OP = range(5)
_ACC_CODE = {0: 0, 1: 1, 2: 2}


def _affine(e):
    return e.const, tuple(e.loops.items())


def _clamps(trace, rec):
    """mask= as per-axis bounds: each comparison must bound one tile index by an affine bound in
    the loop indices."""
    if rec.mask is None:
        return ()
    ndim = len(rec.dst.shape) if rec.dst.shape else 1
    out = []
    for expr, op in rec.mask.atoms:
        shift = ndim - len(expr.shape)
        axes = [(d + shift, c) for d, c in expr.axes.items() if c]
        if len(axes) != 1 or axes[0][0] < 0:
            raise NkiError(
                "mask",
                "each mask comparison must bound exactly one tile index "
                "(e.g. i_p + 128 * i < n)",
                trace.sources[rec.source],
            )
        axis, c = axes[0]
        if axis > 0:
            for t in rec.operands():
                if len(t.shape) != ndim:
                    raise NkiError(
                        "mask",
                        "a mask on a free axis needs operands of one shape",
                        trace.sources[rec.source],
                    )
        r_const, r_terms = expr.const, dict(expr.loops)
        forms = {
            "<": [(c, 1)],
            "<=": [(c, 0)],
            ">": [(-c, 1)],
            ">=": [(-c, 0)],
            "==": [(c, 0), (-c, 0)],
        }[op]
        for a, extra in forms:
            # a * i + b <= 0 with b = sign * r + extra
            sign = 1 if a == c else -1
            b_const = sign * r_const + extra
            b_terms = {k: sign * v for k, v in r_terms.items()}
            if a > 0:
                # i < floor(-b / a) + 1 = ceil((-b + 1) / a)
                num = (1 - b_const, tuple((k, -v) for k, v in b_terms.items()))
                out.append((axis, True, num[0], num[1], a))
            else:
                out.append((axis, False, b_const, tuple(b_terms.items()), -a))
    return tuple(out)


def _check_affine_dependences(trace):
    """A value carried from one affine_range iteration to the next is a dependence the NKI
    compiler does not allow (iterations may run in any order or overlap), except accumulation
    (``+=``, matmul into PSUM)."""
    kinds = {i: s for i, s in enumerate(trace.body) if s[0] == "loop"}
    for buf in trace.buffers:
        if buf.dropped or not buf.readers:
            continue
        for w in buf.writers:
            if w.iadd or (buf.zero_init and w.opcode == "memset"):
                continue
            view = w.dst if w.dst.buf is buf else w.acc
            if view is None:
                continue
            addr_vars = set(view.part.loops) | set(view.off.loops)
            for lp in w.loops:
                loop = kinds[lp]
                if loop[3] != "affine" or lp in buf.decl_loops or loop[1] in addr_vars:
                    continue
                if any(lp in r.loops for r in buf.readers):
                    raise NkiError(
                        "affine-range-dependence",
                        f"{buf.name} is written at the same place in every iteration of an "
                        "affine_range loop and read in it: a loop-carried dependence "
                        "(use nl.sequential_range, or accumulate with +=)",
                        trace.sources[w.source],
                    )


def _elide_zero(trace, buf, p):
    if not buf.zero_init or buf.space != "psum" or buf.bytes > p["psum_bank_bytes"]:
        return False
    if str(buf.dtype) != "float32":
        return False
    for w in buf.writers:
        if w.opcode == "memset":
            continue
        d = w.dst
        if (
            w.opcode != "matmul"
            or w.accumulate != 1
            or d.shape != buf.shape
            or d.part.const
            or d.part.loops
            or d.off.const
            or d.off.loops
        ):
            return False
    return True


def _operand(t):
    return None if t is None else t.operand()


def _scalar(s):
    if s is None:
        return None
    if isinstance(s, int | float):
        return float(s)
    return s.operand()


def build(trace, params) -> tuple:
    """The kernel tuple for ``_C._nki_launch``."""
    if trace.generation == "legacy":
        _check_affine_dependences(trace)
    # Loop ends, to free a tile after the loop statement holding its last use.
    end_of = {}
    stack = []
    for i, s in enumerate(trace.body):
        if s[0] == "loop":
            stack.append(i)
        elif s[0] == "end":
            end_of[stack.pop()] = i
    frees = {}
    alloc_pos = {}
    for i, s in enumerate(trace.body):
        if s[0] == "alloc":
            alloc_pos[s[1].id] = i
    for buf in trace.buffers:
        if buf.space == "hbm" or buf.dropped:
            continue
        last = buf.last_use if buf.last_use is not None else alloc_pos[buf.id]
        frees.setdefault(end_of.get(last, last), []).append(buf.id)

    ops, body = [], []
    for i, s in enumerate(trace.body):
        kind = s[0]
        if kind == "loop":
            body.append((LOOP, s[1], s[2]))
        elif kind == "end":
            body.append((END, 0, 0))
        elif kind == "alloc":
            if not s[1].dropped:
                body.append((ALLOC, s[1].id, 0))
        elif kind == "op":
            rec = s[1]
            body.append((OP, len(ops), 0))
            ops.append(
                (
                    rec.opcode,
                    rec.engine,
                    rec.source,
                    _operand(rec.dst),
                    _operand(rec.src0),
                    _operand(rec.src1),
                    _operand(rec.src2),
                    _operand(rec.acc),
                    _scalar(rec.op0),
                    _scalar(rec.op1),
                    rec.fields,
                    _ACC_CODE[rec.accumulate],
                    _clamps(trace, rec),
                )
            )
        for b in frees.get(i, ()):
            body.append((FREE, b, 0))
    buffers = []
    for b in trace.buffers:
        b.elide_zero = _elide_zero(trace, b, params) if not b.dropped else False
        buffers.append(
            (
                b.name,
                b.describe_shape(),
                SPACE_CODE[b.space],
                b.partitions,
                b.bytes,
                b.hbm_address,
                b.elide_zero,
                b.source,
            )
        )
    return (
        trace.name,
        list(trace.sources),
        buffers,
        ops,
        body,
        trace.nvars,
        trace.grid,
        trace.core_var,
    )
