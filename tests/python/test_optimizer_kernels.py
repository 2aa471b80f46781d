"""The optimizer paths PyTorch picks on an accelerator run natively and match CPU.

- every ``_foreach_*`` OpInfo of PyTorch's foreach op databases, on its first samples (float32
  and bfloat16, out-of-place and in-place), against the CPU; the ones this backend makes native
  (one multi-tensor launch) must not touch the CPU fallback;
- ``torch.optim`` AdamW/Adam/SGD with ``foreach=True`` and ``fused=True``, with
  ``clip_grad_norm_`` (``_foreach_norm`` + ``linalg_vector_norm``), and a ``GradScaler`` step under
  fp16 and bf16 autocast with an overflowing step: parameters, scales and the fallback set.
"""

import copy
import itertools

import neuronsim
import pytest
import torch
from tensor_trees import to_cpu, to_neuron
from torch.testing._internal import common_methods_invocations as cmi

FOREACH_DB = (
    cmi.foreach_unary_op_db
    + cmi.foreach_binary_op_db
    + cmi.foreach_pointwise_op_db
    + cmi.foreach_reduce_op_db
    + cmi.foreach_other_op_db
)
# Foreach ops whose per-tensor op is not native yet: their CompositeExplicitAutograd kernel
# loops over aten::acos etc., which take the CPU fallback. Not run here: the fallback warns once
# per op and process, and test_tensors checks that warning.
PER_TENSOR_FALLBACK = {
    "_foreach_acos",
    "_foreach_asin",
    "_foreach_atan",
    "_foreach_cosh",
    "_foreach_sinh",
    "_foreach_tan",
    "_foreach_log10",
    "_foreach_erfc",
    "_foreach_lgamma",
}
SAMPLES = 6
NATIVE_FOREACH = [o for o in FOREACH_DB if o.name not in PER_TENSOR_FALLBACK]


def _close(a, b, dtype):
    tol = dict(atol=1e-5, rtol=1.3e-6) if dtype == torch.float32 else dict(atol=1e-2, rtol=1.6e-2)
    torch.testing.assert_close(to_cpu(a), b, equal_nan=True, **tol)


@pytest.mark.parametrize("op", NATIVE_FOREACH, ids=lambda o: o.name)
def test_foreach_opinfo_samples_match_cpu(op):
    ran = 0
    for dtype in (torch.float32, torch.bfloat16):
        if dtype not in op.supported_dtypes("cpu"):
            continue
        torch.manual_seed(0)
        for s in itertools.islice(op.sample_inputs("cpu", dtype, num_input_tensors=[3]), SAMPLES):
            for fn in (op.op, op.inplace_variant):
                if fn is None:
                    continue
                cin = [t.clone() for t in s.input]
                din = to_neuron([t.clone() for t in s.input])
                try:
                    cout = fn(cin, *s.args, **s.kwargs)
                except Exception:
                    with pytest.raises(Exception):  # noqa: B017 - both sides must raise
                        fn(din, *to_neuron(s.args), **to_neuron(s.kwargs))
                    continue
                neuronsim.clear_op_tracking()
                dout = fn(din, *to_neuron(s.args), **to_neuron(s.kwargs))
                assert neuronsim.get_fallback_ops() == set(), op.name
                _close(din, cin, dtype)
                if cout is not None:
                    _close(dout, cout, dtype)
                ran += 1
    assert ran > 0


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


OPTIMIZERS = {
    "adamw_foreach": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, foreach=True),
    "adamw_fused": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, fused=True),
    "adam_fused_amsgrad_maximize": lambda p: torch.optim.Adam(
        p, lr=1e-2, amsgrad=True, maximize=True, fused=True
    ),
    "adam_fused_tensor_lr": lambda p: torch.optim.Adam(p, lr=torch.tensor(1e-2), fused=True),
    "sgd_fused_momentum": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, fused=True),
    "sgd_fused_plain": lambda p: torch.optim.SGD(p, lr=1e-2, weight_decay=0.01, fused=True),
    "sgd_foreach_nesterov": lambda p: torch.optim.SGD(
        p, lr=1e-2, momentum=0.9, nesterov=True, foreach=True
    ),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_step_native_and_matches_cpu(name):
    make = OPTIMIZERS[name]
    results = {}
    for dev in ("cpu", "neuron"):
        m = _model().to(dev)
        opt = make(m.parameters())
        neuronsim.clear_op_tracking()
        for step in range(3):
            torch.manual_seed(step)
            x = torch.randn(5, 8).to(dev)
            opt.zero_grad()
            m(x).square().mean().backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            opt.step()
        results[dev] = [p.detach().cpu() for p in m.parameters()]
        if dev == "neuron":
            assert neuronsim.get_fallback_ops() == set()
            executed = neuronsim.get_executed_ops()
            assert "aten::linalg_vector_norm" in executed
            if "fused" in name:
                assert any(o.startswith("aten::_fused_") for o in executed)
    for c, d in zip(results["cpu"], results["neuron"], strict=True):
        torch.testing.assert_close(d, c, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("fused", [False, True], ids=["foreach", "fused"])
@pytest.mark.parametrize("unscale", [False, True], ids=["step", "unscale_clip"])
def test_grad_scaler_step_native_and_matches_cpu(dtype, fused, unscale):
    base = _model()
    results = {}
    for dev in ("cpu", "neuron"):
        m = copy.deepcopy(base).to(dev)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2, fused=fused, foreach=not fused)
        scaler = torch.amp.GradScaler(dev, init_scale=2.0**10, growth_interval=2)
        neuronsim.clear_op_tracking()
        scales = []
        for step in range(4):
            torch.manual_seed(step)
            x = torch.randn(5, 8).to(dev)
            opt.zero_grad()
            with torch.autocast(dev, dtype=dtype):
                loss = m(x).float().square().mean()
            if step == 2:  # an overflow: the step is skipped and the scale backs off
                loss = loss * float("inf")
            scaler.scale(loss).backward()
            if unscale:
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
        results[dev] = ([p.detach().cpu() for p in m.parameters()], scales)
        if dev == "neuron":
            assert neuronsim.get_fallback_ops() == set()
            executed = neuronsim.get_executed_ops()
            assert "aten::_amp_update_scale_" in executed
    assert results["neuron"][1] == results["cpu"][1] == [1024.0, 2048.0, 1024.0, 1024.0]
    for c, d in zip(results["cpu"][0], results["neuron"][0], strict=True):
        torch.testing.assert_close(d, c, atol=1e-6, rtol=1e-5)
