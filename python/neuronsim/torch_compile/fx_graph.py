"""An ATen FX graph (after AOT autograd) as the graph compiler's input: every tensor an FX node
produces becomes a value with its layout, every ATen call a node with schema-named arguments.
The compiler itself (lowering, fusion, program emission) is C++ (kernels/graph)."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import torch
import torch.fx
import torch.utils._pytree as pytree

from neuronsim import _C

# Random ops have device kernels of their own (backend/aten/random_ops.cpp), outside the kernel
# library's timing table.
_RANDOM_OPS = {
    "aten::native_dropout",
    "aten::bernoulli",
    "aten::uniform",
    "aten::normal",
    "aten::random",
    "aten::rand",
    "aten::rand_like",
    "aten::randn",
    "aten::randn_like",
}


class UnsupportedGraph(Exception):
    """A graph the compiler cannot take (the backend runs it with eager kernels instead)."""


@dataclass
class GraphDescription:
    builder: object
    call_nodes: list = field(default_factory=list)  # FX nodes given to C++, by node index
    value_node: dict = field(default_factory=dict)  # value id -> FX node holding the tensor
    input_nodes: list = field(
        default_factory=list
    )  # the graph inputs, in order (placeholders, get_attr)


# Ops whose eager path does host work (the CPU convolution, charged as host time): they end a
# launch rather than join it.
_HOST_OPS = {"aten::convolution", "aten::convolution_backward"}

# Functional collectives (torch.distributed._functional_collectives: DTensor, tensor parallelism
# and FSDP2 under torch.compile) and their waits. A collective is an operation of the ranks'
# collective streams where the ranks' clocks meet, after the compute that produced its input:
# it ends a launch, runs as in eager mode (the neuron c10d backend places it on the timeline)
# and the next launch starts after it; `wait_tensor` orders the compute stream after the
# collective, as in eager mode.
_COLLECTIVE_NAMESPACES = ("_c10d_functional::", "c10d_functional::", "_dtensor::")


def is_collective(op: str) -> bool:
    return op.startswith(_COLLECTIVE_NAMESPACES)


def _op_name(n: torch.fx.Node) -> str:
    t = n.target
    return t._schema.name if isinstance(t, torch._ops.OpOverload) else ""


def _mutates(n: torch.fx.Node) -> bool:
    t = n.target
    return isinstance(t, torch._ops.OpOverload) and t._schema.is_mutable


def overlap_collectives(gm: torch.fx.GraphModule) -> int:
    """Issues each functional collective as soon as its inputs exist and waits for it as late as
    the graph allows, as the Neuron compiler and Inductor's comm reordering do: the compute in
    between (a backward's weight gradients while the input gradient is all-reduced) then runs
    on the compute stream while the collective runs on its own. A wait moves down past nodes
    that neither read its result nor mutate anything (a graph's trailing copies into its
    inputs stay after it). Returns how many nodes moved."""
    g = gm.graph
    moved = 0
    for n in list(g.nodes):
        if n.op != "call_function" or not is_collective(_op_name(n)):
            continue
        if _op_name(n).endswith("wait_tensor"):
            continue
        order = {x: i for i, x in enumerate(g.nodes)}
        last_placeholder = max(
            (x for x in g.nodes if x.op == "placeholder"), key=order.get, default=None
        )
        anchors = [x for x in n.all_input_nodes] + (
            [last_placeholder] if last_placeholder is not None else []
        )
        if not anchors:
            continue
        after = max(anchors, key=order.get)
        if order[after] + 1 < order[n]:
            after.append(n)
            moved += 1
    for n in list(g.nodes):
        if n.op != "call_function" or _op_name(n) != "_c10d_functional::wait_tensor":
            continue
        users = set(n.users)
        stop = n.next
        while stop.op != "output" and stop not in users and not _mutates(stop):
            stop = stop.next
        if stop is not n.next:
            stop.prepend(n)
            moved += 1
    if moved:
        g.lint()
        gm.recompile()
    return moved


def has_device_kernel(op: str, overload: str = "default") -> bool:
    """Whether the eager backend runs `op` on the device: a kernel-library op, a random op, or a
    composite that decomposes into device ops when it runs. Everything else (structured out=
    kernels with no device version, the CPU convolution) is host work."""
    if op in _HOST_OPS or is_collective(op):
        return False
    if op in _RANDOM_OPS or _C._has_device_kernel(op):
        return True
    if "::" in op and op.split("::", 1)[0] not in ("aten", "prims"):
        # An NKI kernel registered with nki_op: an eager node whose program joins the launch.
        from neuronsim.nki.torch_ops import is_nki_op

        if is_nki_op(op):
            return True
    name = op if overload in ("", "default") else f"{op}.{overload}"
    return any(
        torch._C._dispatch_has_kernel_for_dispatch_key(name, key)
        for key in ("CompositeImplicitAutograd", "CompositeExplicitAutograd")
    )


def describe(gm: torch.fx.GraphModule, concrete) -> GraphDescription:
    """Describes `gm`; `concrete` turns a (possibly symbolic) size into an int."""
    b = _C._GraphBuilder()
    d = GraphDescription(b)
    value_of: dict = {}
    tuple_values: dict = {}

    def add_value(name, t) -> int:
        if t.layout != torch.strided:
            raise UnsupportedGraph(f"{name} has layout {t.layout}")
        sizes = [concrete(s) for s in t.shape]
        strides = [concrete(s) for s in t.stride()]
        return b.add_value(
            name,
            str(t.dtype).removeprefix("torch."),
            sizes,
            strides,
            concrete(t.storage_offset()),
            t.device.type == "neuron",
        )

    def convert(x):
        if isinstance(x, torch.fx.Node):
            if x in value_of:
                return ("tensor", value_of[x])
            val = x.meta.get("val")
            if isinstance(val, torch.SymInt | torch.SymFloat | torch.SymBool | int | float | bool):
                return convert(val)
            raise UnsupportedGraph(f"argument {x.name} is neither a tensor nor a number")
        if isinstance(x, list | tuple):
            if any(isinstance(e, torch.fx.Node) and e in value_of for e in x):
                return ("tensors", [value_of[e] if e is not None else -1 for e in x])
            return [convert(e) for e in x]
        if isinstance(x, torch.SymBool):
            return bool(concrete(x))
        if isinstance(x, torch.SymInt):
            return int(concrete(x))
        if isinstance(x, torch.SymFloat):
            return float(concrete(x))
        if x is None or isinstance(x, bool | int | float | str):
            return x
        if isinstance(x, torch.dtype):
            return str(x).removeprefix("torch.")
        return str(x)

    for n in gm.graph.nodes:
        if n.op in ("placeholder", "get_attr"):
            val = n.meta.get("val")
            if isinstance(val, torch.Tensor):
                v = add_value(n.name, val)
                b.add_input(v)
                value_of[n] = v
                d.value_node[v] = n
                d.input_nodes.append(n)
            continue
        if n.op == "output":
            for x in pytree.tree_leaves(n.args[0]):
                if isinstance(x, torch.fx.Node) and x in value_of:
                    b.add_output(value_of[x])
            continue
        if n.op != "call_function":
            raise UnsupportedGraph(f"{n.op} node {n.name}")
        if n.target is operator.getitem:
            src, idx = n.args
            if src in tuple_values and tuple_values[src][idx] >= 0:
                v = tuple_values[src][idx]
                value_of[n] = v
                d.value_node[v] = n
            continue
        val = n.meta.get("val")
        outputs = []
        if isinstance(val, torch.Tensor):
            outputs = [add_value(n.name, val)]
            value_of[n] = outputs[0]
            d.value_node[outputs[0]] = n
        elif isinstance(val, list | tuple):
            outputs = [
                add_value(f"{n.name}.{i}", x) if isinstance(x, torch.Tensor) else -1
                for i, x in enumerate(val)
            ]
            tuple_values[n] = outputs
        if isinstance(n.target, torch._ops.OpOverload):
            schema = n.target._schema
            op, overload = schema.name, schema.overload_name or "default"
            args = []
            for i, a in enumerate(schema.arguments):
                if i < len(n.args) and not a.kwarg_only:
                    x = n.args[i]
                elif a.name in n.kwargs:
                    x = n.kwargs[a.name]
                elif a.has_default_value():
                    x = a.default_value
                else:
                    x = None
                args.append((a.name, convert(x)))
            kernel = has_device_kernel(op, overload)
        else:
            # A Python callable (a higher-order op or a helper): runs on the host as it is.
            op = f"python::{getattr(n.target, '__name__', n.target)}"
            overload, kernel = "", False
            flat = pytree.tree_leaves((n.args, n.kwargs))
            args = [(f"arg{i}", convert(x)) for i, x in enumerate(flat)]
        b.add_node(n.name, op, overload, args, outputs, kernel)
        d.call_nodes.append(n)
    return d
