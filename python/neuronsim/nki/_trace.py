"""The kernel being traced: its statements (loops, tile allocations, instruction templates),
buffers and source lines, as kernels/nki/kernel_ir.h describes them.

A legacy kernel's ``affine_range``/``sequential_range`` loop is traced once: the loop statement
holds the body's templates, with the loop index symbolic (``_expr.LoopVar``), and the device
expansion (C++) runs it. A current-generation kernel runs its loops in Python, so its statement
list is flat.
"""

import os
import sys

from neuronsim.nki.errors import NkiError

_HERE = os.path.dirname(os.path.abspath(__file__))
# Frames in these directories are the front end's, not the kernel's.
_INTERNAL_DIRS = (_HERE + os.sep,)
_internal_cache: dict = {}


def add_internal_dir(path: str) -> None:
    """The import-name shims (neuronxcc.nki, nki) are front end too."""
    global _INTERNAL_DIRS  # noqa: PLW0603
    _INTERNAL_DIRS = (*_INTERNAL_DIRS, os.path.dirname(os.path.abspath(path)) + os.sep)


def _is_internal(filename: str) -> bool:
    r = _internal_cache.get(filename)
    if r is None:
        r = filename.startswith(_INTERNAL_DIRS)
        _internal_cache[filename] = r
    return r


SPACE_CODE = {"hbm": 0, "sbuf": 1, "psum": 2}


class Buffer:
    """A tensor of the kernel: an HBM tensor, or an on-chip tile declaration (allocated each time
    its statement runs, freed after its last use)."""

    __slots__ = (
        "id",
        "name",
        "space",
        "shape",
        "dtype",
        "partitions",
        "bytes",
        "hbm_address",
        "hbm_ptr",
        "elide_zero",
        "source",
        "decl_loops",
        "last_use",
        "dropped",
        "zero_init",
        "writers",
        "readers",
        "host_array",
    )

    def __init__(self, bid, name, space, shape, dtype, partitions, nbytes, source, decl_loops):
        self.id = bid
        self.name = name
        self.space = space
        self.shape = shape
        self.dtype = dtype
        self.partitions = partitions
        self.bytes = nbytes
        self.hbm_address = 0
        self.hbm_ptr = 0
        self.elide_zero = False
        self.source = source
        self.decl_loops = decl_loops  # loop statement positions open at the declaration
        self.last_use = None  # statement position in the declaring block to free after
        self.dropped = False  # a temporary whose producer was retargeted
        self.zero_init = False
        self.writers = []
        self.readers = []
        self.host_array = None

    def describe_shape(self) -> str:
        from neuronsim.nki._dtypes import device_name

        return f"[{', '.join(str(int(s)) for s in self.shape)}] {device_name(self.dtype)}"


class OpRecord:
    __slots__ = (
        "opcode",
        "engine",
        "source",
        "dst",
        "src0",
        "src1",
        "src2",
        "acc",
        "op0",
        "op1",
        "fields",
        "accumulate",
        "mask",
        "iadd",
        "pos",
        "loops",
    )

    def __init__(self, opcode, source):
        self.opcode = opcode
        self.engine = None
        self.source = source
        self.dst = self.src0 = self.src1 = self.src2 = self.acc = None
        self.op0 = self.op1 = None
        self.fields = {}
        self.accumulate = 0
        self.mask = None
        self.iadd = False
        self.pos = 0
        self.loops = ()

    def operands(self):
        for t in (self.dst, self.src0, self.src1, self.src2, self.acc):
            if t is not None:
                yield t
        for s in (self.op0, self.op1):
            if s is not None and not isinstance(s, int | float):
                yield s


class Trace:
    """Everything traced from one kernel call."""

    def __init__(self, name: str, generation: str, full: bool):
        self.name = name
        self.generation = generation  # "legacy" | "current"
        self.full = full  # values computed (else timing only)
        self.body = []  # ["loop", var, trip, kind] | ["end"] | ["alloc", buf] | ["op", rec]
        self.loop_stack = []  # (statement position, var, kind)
        self.nvars = 0
        self.sources = []
        self._source_ids = {}
        self.buffers = []
        self.ops = []
        self.core_var = -1
        self.grid = 1
        self.device = 0
        self.hbm_allocations = []

    # ---- source lines ----
    def source_id(self) -> int:
        f = sys._getframe(1)
        while f is not None and _is_internal(f.f_code.co_filename):
            f = f.f_back
        if f is None:
            key = "<unknown>"
        else:
            key = (f.f_code.co_filename, f.f_lineno)
        sid = self._source_ids.get(key)
        if sid is None:
            sid = len(self.sources)
            self._source_ids[key] = sid
            self.sources.append(
                key if isinstance(key, str) else f"{os.path.basename(key[0])}:{key[1]}"
            )
        return sid

    def where(self, source=None) -> str:
        sid = self.source_id() if source is None else source
        return self.sources[sid] if 0 <= sid < len(self.sources) else ""

    def error(self, rule: str, message: str, source=None) -> NkiError:
        return NkiError(rule, message, self.where(source))

    # ---- loops ----
    def new_var(self) -> int:
        v = self.nvars
        self.nvars += 1
        return v

    def open_loop(self, trip: int, kind: str) -> int:
        var = self.new_var()
        self.loop_stack.append((len(self.body), var, kind))
        self.body.append(["loop", var, trip, kind])
        return var

    def close_loop(self) -> None:
        self.loop_stack.pop()
        self.body.append(["end"])

    def loops(self) -> tuple:
        return tuple(p for p, _, _ in self.loop_stack)

    # ---- buffers and ops ----
    def new_buffer(self, name, space, shape, dtype, partitions, nbytes, source) -> Buffer:
        b = Buffer(
            len(self.buffers), name, space, shape, dtype, partitions, nbytes, source, self.loops()
        )
        self.buffers.append(b)
        if space != "hbm":
            self.body.append(["alloc", b])
        return b

    def add_op(self, rec: OpRecord) -> OpRecord:
        rec.pos = len(self.body)
        rec.loops = self.loops()
        self.body.append(["op", rec])
        self.ops.append(rec)
        for _i, t in enumerate(rec.operands()):
            self.use(t.buf, rec, write=(t is rec.dst or t is rec.acc))
        return rec

    def use(self, buf: Buffer, rec: OpRecord, write: bool) -> None:
        (buf.writers if write else buf.readers).append(rec)
        if buf.space == "hbm":
            return
        here = rec.loops
        decl = buf.decl_loops
        if here[: len(decl)] != decl:
            raise self.error(
                "tile-scope",
                f"{buf.name} is used outside the loop body that declares it",
                rec.source,
            )
        # The statement of the declaring block that holds this use: free after it.
        top = here[len(decl)] if len(here) > len(decl) else rec.pos
        if buf.last_use is None or top > buf.last_use:
            buf.last_use = top


_current = None


def current() -> Trace:
    if _current is None:
        raise NkiError("no-kernel", "NKI language and ISA calls run inside an @nki.jit kernel")
    return _current


def active():
    return _current


class tracing:
    """Context: makes `trace` the kernel being traced."""

    def __init__(self, trace: Trace):
        self.trace = trace

    def __enter__(self):
        global _current  # noqa: PLW0603
        self.saved = _current
        _current = self.trace
        return self.trace

    def __exit__(self, *exc):
        global _current  # noqa: PLW0603
        _current = self.saved
        return False
