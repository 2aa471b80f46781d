"""trn2 LNC=2 for the row kernels: reductions, softmax (and its backward) and layer norm split
their rows across both physical cores of the logical core (kernels/spmd.h), as matmul and
elementwise ops do. In ISA mode the device computes the values, which match the CPU, and each
of these ops is one grid-2 launch in the trace.
"""

import json

from conftest import run_python

_RUN = """
    import json, os, tempfile, torch, neuronsim
    import neuronsim.tracing
    import torch.nn.functional as F
    torch.manual_seed(0)
    x = torch.randn(1024, 768)
    w, b = torch.rand(768) + 0.5, torch.randn(768)
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    ops = {
        "sum": lambda t: t.sum(1),
        "amax0": lambda t: t.amax(0),
        "var": lambda t: t.var(1),
        "softmax": lambda t: torch.softmax(t, 1),
        "layer_norm": lambda t: F.layer_norm(t, (768,), w.to(t.device), b.to(t.device)),
    }
    errs = {}
    with neuronsim.tracing.trace(path):
        for name, f in ops.items():
            ref = f(x)
            err = (f(x.to("neuron")).cpu() - ref).abs().max().item()
            errs[name] = err / max(1.0, ref.abs().max().item())
        xs = x.to("neuron").requires_grad_()
        gy = torch.randn_like(x)
        torch.softmax(xs, 1).backward(gy.to("neuron"))
        xc = x.clone().requires_grad_()
        torch.softmax(xc, 1).backward(gy)
        errs["softmax_backward"] = (xs.grad.cpu() - xc.grad).abs().max().item()
    events = json.load(open(path))["traceEvents"]
    grids = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            grids.setdefault(e["name"], set()).add(e["args"].get("grid", 1))
    print(json.dumps({"errs": errs, "fallbacks": sorted(neuronsim.get_fallback_ops()),
                      "grids": {k: sorted(v) for k, v in grids.items()}}))
"""


def test_row_kernels_split_across_the_logical_core_and_match_cpu():
    r = run_python(_RUN, env={"NEURON_SIM_PRESET": "trn2", "NEURON_SIM_MODE": "isa"})
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert not out["fallbacks"], out
    for name, err in out["errs"].items():
        assert err < 1e-5, (name, err)  # relative to the result's largest magnitude
    grids = out["grids"]
    for k in (
        "aten::sum",
        "aten::amax",
        "aten::var",
        "aten::_softmax",
        "aten::native_layer_norm",
        "aten::_softmax_backward_data",
    ):
        names = [n for n in grids if n.startswith(k)]
        assert names, (k, grids)
        assert all(grids[n] == [2] for n in names), (k, grids)
