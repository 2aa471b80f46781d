"""Running a compiled graph: the FX graph executes on the host for its values (each ATen op on
zero-copy CPU views of device memory, as in eager mode, but with no per-op program), and one
launch per segment runs the fused programs for the time (ISA mode: for the values too).

The graph is rewritten once per compiled variant: a launch node at the end of each segment
(before the host node that ends it, or before the output), eager nodes wrapped so their device
programs are collected into the launch, host nodes wrapped to run as in eager mode."""

from __future__ import annotations

import operator

import torch
import torch.fx

from neuronsim import _C

_OFF, _FUSED, _EAGER = 0, 1, 2


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
        if rec["class"] == "eager":
            segment = report["regions"][rec["region"]]["segment"]
            node.target = _EagerNode(handle, i, node.target, alive[segment])
        elif rec["class"] == "host":
            node.target = _HostNode(node.target)
    for k, seg in enumerate(report["segments"]):
        host = seg["host_node"]
        where = env[description.call_nodes[host]] if host >= 0 else output
        args = tuple(env[description.value_node[v]] for v in seg["values"])
        with g.inserting_before(where):
            g.call_function(_Launch(handle, k, alive[k]), args)
    return torch.fx.GraphModule(gm, g), alive


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

    def run(self, args):
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
