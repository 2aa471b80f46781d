"""Running a compiled graph: the FX graph executes on the host for its values, and one launch per
segment runs the fused programs for the time (ISA mode: for the values too).

Fast mode, a graph that is one launch of fused programs (no eager or host nodes, no 64-bit
device values): one host call computes the values. The graph runs as plain CPU ATen ops on
zero-copy CPU views of its device inputs, with no per-node device dispatch; its large tensors
are allocated in device memory, so its device outputs become device tensors with no copy
(outputs that alias inputs stay views of them), and the launch runs. Input mutations write
device memory through the views. RecordFunction is off during the run unless the profiler
listens: the op observer would only box each CPU op's inputs to ignore them.

Otherwise (ISA mode, NEURONSIM_COMPILE_VERIFY, eager or host nodes) the graph is rewritten once
per compiled variant: each ATen op runs on the device tensors (host values on CPU views, as in
eager mode, but with no per-op program), a launch node at the end of each segment (before the
host node that ends it, or before the output), eager nodes wrapped so their device programs are
collected into the launch, host nodes wrapped to run as in eager mode."""

from __future__ import annotations

import operator
import os

import torch
import torch.fx
import torch.utils._pytree as pytree

from neuronsim import _C
from neuronsim.torch_compile.host_rewrites import rewrite_host_graph

_OFF, _FUSED, _EAGER = 0, 1, 2
_VERIFY = bool(os.environ.get("NEURONSIM_COMPILE_VERIFY"))


class _Launch:
    """The launch of one segment: its tensors are the values its programs address."""

    __name__ = "neuron_launch"
    __qualname__ = "neuron_launch"

    def __init__(self, handle, segment: int, alive: list):
        self.handle = handle
        self.segment = segment
        self.alive = alive

    def __call__(self, *tensors):
        try:
            self.handle.launch(self.segment, list(tensors))
        finally:
            self.alive.clear()


class _EagerNode:
    """A node the compiler left to the eager backend: its programs join the graph's launch. Its
    programs address its arguments and results: they stay allocated until that launch (the host
    run would otherwise reuse their memory before the programs run)."""

    def __init__(self, handle, index: int, target, alive: list):
        self.handle = handle
        self.index = index
        self.target = target
        self.alive = alive
        self.__name__ = f"neuron_eager_{getattr(target, '__name__', 'op')}".replace(".", "_")
        self.__qualname__ = self.__name__

    def __call__(self, *args, **kwargs):
        _C._capture_push(_EAGER, self.handle, self.index)
        try:
            out = self.target(*args, **kwargs)
        finally:
            _C._capture_pop()
        self.alive.append((args, kwargs, out))
        return out


class _HostNode:
    """A node with no device kernel: it runs between two launches, as in eager mode."""

    def __init__(self, target):
        self.target = target
        self.__name__ = f"neuron_host_{getattr(target, '__name__', 'op')}".replace(".", "_")
        self.__qualname__ = self.__name__

    def __call__(self, *args, **kwargs):
        _C._capture_push(_OFF)
        try:
            return self.target(*args, **kwargs)
        finally:
            _C._capture_pop()


def build_module(
    gm: torch.fx.GraphModule, handle, report: dict, description
) -> torch.fx.GraphModule:
    """A copy of `gm` with the launches and node wrappers of one compiled variant."""
    g = torch.fx.Graph()
    env: dict = {}
    out = g.graph_copy(gm.graph, env)
    output = g.output(out)
    alive = [[] for _ in report["segments"]]  # per segment: what its eager nodes touched
    for i, rec in enumerate(report["nodes"]):
        node = env[description.call_nodes[i]]
        if rec["class"] in ("eager", "native"):
            segment = report["regions"][rec["region"]]["segment"]
            node.target = _EagerNode(handle, i, node.target, alive[segment])
        elif rec["class"] == "host":
            node.target = _HostNode(node.target)
    for k, seg in enumerate(report["segments"]):
        if not seg["parts"]:
            continue  # nothing runs on the device here (two host or collective nodes in a row)
        host = seg["host_node"]
        where = env[description.call_nodes[host]] if host >= 0 else output
        args = tuple(env[description.value_node[v]] for v in seg["values"])
        with g.inserting_before(where):
            g.call_function(_Launch(handle, k, alive[k]), args)
    return torch.fx.GraphModule(gm, g), alive


def _on_device(node) -> bool:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return isinstance(val, torch.Tensor) and val.device.type == "neuron"


_WIDE = (torch.int64, torch.float64, torch.complex64, torch.complex128)


def host_run_unsupported(gm: torch.fx.GraphModule, report: dict) -> str | None:
    """Why the graph's values cannot come from one host call (None: they can)."""
    if len(report["segments"]) != 1 or report["segments"][0]["host_node"] >= 0:
        return "more than one launch"
    if any(n["class"] not in ("fused", "kernel", "view", "cpu") for n in report["nodes"]):
        return "nodes run with eager kernels"
    for n in gm.graph.nodes:
        val = n.meta.get("val")
        if n.op == "output":
            if not isinstance(n.args[0], list | tuple):
                return "nested outputs"
            continue
        for t in pytree.tree_leaves(val):
            # The device computes 64-bit data at 32 bits: such values keep the device ops.
            # Inputs are already what the device holds.
            if (
                isinstance(t, torch.Tensor)
                and t.device.type == "neuron"
                and t.dtype in _WIDE
                and not (n.op == "placeholder" and t.dtype == torch.int64)
            ):
                return f"{n.name} is {t.dtype} on the device"
    return None


def _aliases(n: torch.fx.Node) -> bool:
    t = n.target
    return isinstance(t, torch._ops.OpOverload) and any(
        r.alias_info is not None for r in t._schema.returns
    )


def _read_after(node: torch.fx.Node, pos: int, order: dict, skip: set) -> bool:
    """Whether something after position `pos` reads `node` (directly or through a view)."""
    for r in node.users:
        if r in skip:
            continue
        if order[r] > pos or (_aliases(r) and _read_after(r, pos, order, skip)):
            return True
    return False


def write_results_into_inputs(g: torch.fx.Graph) -> int:
    """The functionalised form of an in-place foreach update (an optimizer step): `_foreach_*`
    results each copied into a graph input at the end. When nothing after the op reads those
    inputs' old values, the op writes into them with its out= overload, the copies go and the
    results' other readers read the inputs (the host run then does what eager's in-place ops
    do). The output node returns (outputs, values the
    programs address): a value may be the input that now holds the result. Returns how many
    ops were rewritten."""
    order = {n: i for i, n in enumerate(g.nodes)}
    output = next(n for n in reversed(g.nodes) if n.op == "output")
    returned = set(pytree.tree_leaves(output.args[0][0]))
    rewritten = 0
    for n in list(g.nodes):
        t = n.target
        if n.op != "call_function" or not isinstance(t, torch._ops.OpOverload):
            continue
        if not t._schema.name.startswith("aten::_foreach_"):
            continue
        out_overload = getattr(t.overloadpacket, f"{t._overloadname}_out", None)
        val = n.meta.get("val")
        if out_overload is None or not isinstance(val, list | tuple) or not val:
            continue
        copies: dict = {}
        for u in n.users:
            if u.target is not operator.getitem or u in returned:
                break
            found = [
                c
                for c in u.users
                if c.target is torch.ops.aten.copy_.default
                and c.args[1] is u
                and isinstance(c.args[0], torch.fx.Node)
                and c.args[0].op == "placeholder"
            ]
            if len(found) != 1:
                break
            copies[u.args[1]] = (u, found[0])
        else:
            if sorted(copies) != list(range(len(val))):
                continue
            outs = [copies[i][1].args[0] for i in range(len(val))]
            if len(set(outs)) != len(outs):
                continue
            # Elementwise: reading x[i] while writing it is fine, another position is not.
            lists = [a for a in n.args if isinstance(a, list | tuple)]
            if any(x in outs and outs[j] is not x for a in lists for j, x in enumerate(a)):
                continue
            skip = {n, output} | {c for _, c in copies.values()}
            if any(d in returned or _read_after(d, order[n], order, skip) for d in outs):
                continue
            with g.inserting_before(n):
                g.call_function(out_overload, n.args, {**n.kwargs, "out": outs})
            for u, c in copies.values():
                dst = c.args[0]
                c.replace_all_uses_with(dst)
                g.erase_node(c)
                u.replace_all_uses_with(dst)
                g.erase_node(u)
            g.erase_node(n)
            rewritten += 1
    return rewritten


def build_host_module(gm: torch.fx.GraphModule, values: list) -> tuple:
    """A copy of `gm` for CPU tensors: module attributes become trailing arguments, factory
    ops' neuron devices become the CPU, it returns (outputs, `values`' tensors), and the host
    rewrites (host_rewrites.py) apply."""
    cpu = torch.device("cpu")

    def to_cpu(x):
        return cpu if isinstance(x, torch.device) and x.type == "neuron" else x

    g = torch.fx.Graph()
    env: dict = {}
    out = g.graph_copy(gm.graph, env)
    g.output((out, tuple(env[v] for v in values)))
    placeholders = [n for n in g.nodes if n.op == "placeholder"]
    attrs = []
    constants = {}  # attribute placeholder -> its tensor
    for n in list(g.nodes):
        if n.op == "get_attr":
            where = (
                g.inserting_after(placeholders[-1])
                if placeholders
                else g.inserting_before(next(iter(g.nodes)))
            )
            with where:
                p = g.placeholder(f"_attr_{len(attrs)}")
            p.meta = dict(n.meta)
            placeholders.append(p)
            n.replace_all_uses_with(p)
            attrs.append(n.target)
            constants[p] = operator.attrgetter(n.target)(gm)
            g.erase_node(n)
        elif n.op == "call_function":
            n.args = tuple(to_cpu(a) for a in n.args)
            n.kwargs = {k: to_cpu(v) for k, v in n.kwargs.items()}
    write_results_into_inputs(g)
    rewrite_host_graph(g, constants)
    return torch.fx.GraphModule(torch.nn.Module(), g), attrs


class HostRun:
    """Fast mode's values in one host call (see the module's docstring)."""

    def __init__(self, gm, handle, report, description):
        self.handle = handle
        seg = report["segments"][0]
        nodes = [description.value_node[v] for v in seg["values"]]
        self.module, self.attrs = build_host_module(gm, nodes)
        self.gm = gm
        output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
        self.out_device = [_on_device(x) for x in output.args[0]]
        self.out_type = type(output.args[0])
        self.value_device = [_on_device(n) for n in nodes]
        names = []
        for n in gm.graph.nodes:
            if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
                if any(_on_device(x) for x in (n, *n.all_input_nodes)):
                    schema = n.target._schema
                    o = schema.overload_name
                    names.append(f"{schema.name}.{o}" if o else schema.name)
        self.op_ids = _C._op_ids(names)

    def run(self, args):
        h = _C._HostRun()
        inputs = list(args)
        inputs += [operator.attrgetter(a)(self.gm) for a in self.attrs]
        views = h.views(inputs)  # first: they tell the scope the device
        with _C._HostRunScope(h):
            outs, values = self.module(*views)
        outs = h.to_device(outs, self.out_device, False)
        self.handle.launch(0, h.to_device(values, self.value_device, True))
        _C._track_ops(self.op_ids)
        return self.out_type(outs)


class Variant:
    """One compiled form of a graph (one per shape when the graph has dynamic dimensions)."""

    def __init__(self, gm, handle, report, description):
        self.handle = handle
        self.report = report
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        # Where each graph input comes from: a positional argument or a module attribute.
        self.inputs = [
            ("arg", placeholders.index(n)) if n.op == "placeholder" else ("attr", n.target)
            for n in description.input_nodes
        ]
        self.module, self.alive = build_module(gm, handle, report, description)
        self.host_unsupported = host_run_unsupported(gm, report)
        self.host = (
            HostRun(gm, handle, report, description) if self.host_unsupported is None else None
        )

    def run(self, args):
        if self.host is not None and not _C._isa_mode() and not _VERIFY:
            return self.host.run(args)
        for a in self.alive:  # left over by a run that raised before its launch
            a.clear()
        self.handle.begin(
            [
                args[x] if kind == "arg" else operator.attrgetter(x)(self.module)
                for kind, x in self.inputs
            ]
        )
        _C._capture_push(_FUSED)
        try:
            return self.module(*args)
        finally:
            _C._capture_pop()
