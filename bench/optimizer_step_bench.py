"""One AdamW step over a 2-layer transformer's parameters: for-loop vs foreach vs fused.

torch.optim picks one of three implementations: a Python loop over the parameters (a few
elementwise kernels per parameter), ``foreach=True`` (one ``_foreach_*`` multi-tensor launch per
elementwise stage of the update) or ``fused=True`` (one ``_fused_adamw_`` launch for the whole
step). Each row measures one optimizer step (the second one, so the state exists) on the neuron
device: kernel launches and simulated time (launch overheads included, synchronized at the end),
in one run, with the ratios against the for-loop. The gradients are the same in every row (one
backward pass, copied), and the updated parameters are checked to agree between the three.

    .venv/bin/python bench/optimizer_step_bench.py
"""

import copy

import neuronsim
import torch
from neuronsim import _C


def transformer():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024)
    return torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)


def step_cost(base, **kind):
    model = copy.deepcopy(base)  # deepcopy drops .grad: give every copy the same gradients
    for p, q in zip(model.parameters(), base.parameters(), strict=True):
        p.grad = q.grad.clone()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, **kind)
    opt.step()  # the first step creates the state
    torch.neuron.synchronize()
    neuronsim.clear_op_tracking()
    l0, t0 = _C._launches(), neuronsim.simulated_time_ns()
    opt.step()
    torch.neuron.synchronize()
    launches = _C._launches() - l0
    step_ns = neuronsim.simulated_time_ns() - t0
    assert neuronsim.get_fallback_ops() == set(), neuronsim.get_fallback_ops()
    return launches, step_ns, [p.detach().cpu() for p in model.parameters()]


def main():
    base = transformer().to("neuron")
    x = torch.randn(32, 4, 256, device="neuron")
    base(x).square().mean().backward()
    nparams = sum(p.numel() for p in base.parameters())
    ntensors = len(list(base.parameters()))
    print(f"AdamW step over {ntensors} tensors, {nparams / 1e6:.2f} M parameters (fp32)")
    rows = {}
    for name, kind in [
        ("for-loop", {"foreach": False, "fused": False}),
        ("foreach", {"foreach": True}),
        ("fused", {"fused": True}),
    ]:
        rows[name] = step_cost(base, **kind)
    ref = rows["for-loop"]
    print(f"{'':10} {'launches':>9} {'step us':>9}  vs for-loop")
    for name, (launches, ns, params) in rows.items():
        for a, b in zip(params, ref[2], strict=True):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
        print(
            f"{name:10} {launches:9d} {ns / 1e3:9.1f}  "
            f"{ref[0] / launches:5.1f}x fewer launches, {ref[1] / ns:5.2f}x less time"
        )


if __name__ == "__main__":
    main()
