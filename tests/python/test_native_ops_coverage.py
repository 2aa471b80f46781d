"""Ops that used to take the CPU fallback run natively and match CPU: division with rounding
(floor_divide, div with rounding_mode floor/trunc: integer routing in MoE models), flip/roll
(DMA only), eye, linspace/logspace, erfinv, bitwise shifts, isin, unique, mse_loss and its
backward, sgn (real dtypes), softplus_backward, log_sigmoid_backward and unfold_backward, and
zero-filling a complex tensor. Each on its op_db samples (float32, plus int32 and
int64 where the OpInfo has them), with none of its ATen ops on the CPU fallback; plus the
division-by-zero semantics of the CPU (integers raise, floats give inf/nan) and a training step
through flip and roll.
"""

import warnings

import neuronsim
import pytest
import torch
import torch.nn.functional as F
from tensor_trees import base_names, to_cpu, to_neuron
from torch.testing._internal.common_methods_invocations import op_db

OPS = {
    ("floor_divide", ""),
    ("div", "floor_rounding"),
    ("div", "trunc_rounding"),
    ("flip", ""),
    ("fliplr", ""),
    ("flipud", ""),
    ("roll", ""),
    ("rot90", ""),
    ("eye", ""),
    ("linspace", ""),
    ("logspace", ""),
    ("erfinv", ""),
    ("bitwise_left_shift", ""),
    ("bitwise_right_shift", ""),
    ("isin", ""),
    ("unique", ""),
    ("nn.functional.mse_loss", ""),
    ("sgn", ""),
}
FAMILY = {
    "aten::floor_divide",
    "aten::div",
    "aten::flip",
    "aten::roll",
    "aten::eye",
    "aten::linspace",
    "aten::logspace",
    "aten::erfinv",
    "aten::bitwise_left_shift",
    "aten::bitwise_right_shift",
    "aten::isin",
    "aten::_unique2",
    "aten::mse_loss",
    "aten::mse_loss_backward",
    "aten::sgn",
}
OPINFOS = [o for o in op_db if (o.name, o.variant_test_name) in OPS]
# Documented limits that keep the fallback: integer linspace/logspace (the CPU truncates values it
# computes in double), unique with return_inverse/return_counts or along a dim.
LIMITS = {"linspace": {torch.int32, torch.int64}, "logspace": {torch.int32, torch.int64}}


def _name(o):
    return o.name + ("." + o.variant_test_name if o.variant_test_name else "")


@pytest.mark.parametrize("op", OPINFOS, ids=_name)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64], ids=str)
def test_opinfo_samples_native_and_match_cpu(op, dtype):
    if dtype not in op.supported_dtypes("cpu"):
        pytest.skip("dtype not supported by the OpInfo")
    torch.manual_seed(0)
    ran, native = 0, 0
    for s in op.sample_inputs("cpu", dtype):
        try:
            expected = op(s.input, *s.args, **s.kwargs)
        except Exception:
            continue
        neuronsim.clear_op_tracking()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = op(to_neuron(s.input), *to_neuron(s.args), **to_neuron(s.kwargs))
        torch.testing.assert_close(to_cpu(got), to_cpu(expected), equal_nan=True)
        ran += 1
        fallback = base_names(neuronsim.get_fallback_ops()) & FAMILY
        kw = s.kwargs
        unique_flags = op.name == "unique" and (
            kw.get("return_inverse") or kw.get("return_counts") or kw.get("dim") is not None
        )
        if dtype in LIMITS.get(op.name, ()) or unique_flags:
            continue
        assert not fallback, f"{_name(op)} {dtype}: {fallback} fell back for {s}"
        native += 1
    assert ran > 0 and (native > 0 or dtype in LIMITS.get(op.name, ())), (ran, native)


@pytest.mark.parametrize(
    "fn,backward_op",
    [
        (lambda x: F.softplus(x), "aten::softplus_backward"),
        (lambda x: F.softplus(x, beta=2.5, threshold=3.0), "aten::softplus_backward"),
        (lambda x: F.softplus(x, beta=0.5), "aten::softplus_backward"),
        (F.logsigmoid, "aten::log_sigmoid_backward"),
    ],
    ids=["softplus", "softplus_beta_threshold", "softplus_small_beta", "logsigmoid"],
)
def test_activation_backwards_native_and_match_cpu(fn, backward_op):
    """softplus_backward and log_sigmoid_backward (the HF MoE sweep's fallbacks) run natively
    with the CPU's formulas, over both sides of the threshold and large magnitudes."""
    x = torch.cat([torch.linspace(-30, 30, 241), torch.randn(100) * 4])
    g = torch.randn_like(x)
    xc = x.clone().requires_grad_()
    fn(xc).backward(g)
    xd = x.to("neuron").requires_grad_()
    neuronsim.clear_op_tracking()
    fn(xd).backward(g.to("neuron"))
    assert backward_op not in base_names(neuronsim.get_fallback_ops())
    assert backward_op in base_names(neuronsim.get_executed_ops())
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "shape,dim,size,step",
    [
        ((4, 10), 1, 3, 2),  # overlapping windows skip none
        ((4, 10), 1, 4, 3),  # the last position is in no window
        ((3, 9, 5), 1, 2, 4),  # gaps between windows, inner dims
        ((2, 3, 12), -1, 5, 1),  # every position in up to five windows
        ((150, 7), 1, 7, 1),  # more rows than one partition tile
        ((6,), 0, 2, 2),
        ((), 0, 1, 1),  # a 0-dim input
    ],
)
def test_unfold_backward_native_and_matches_cpu(shape, dim, size, step):
    torch.manual_seed(0)
    x = torch.randn(shape)
    xc, xd = x.clone().requires_grad_(), x.to("neuron").requires_grad_()
    wc = xc.unfold(dim, size, step)
    g = torch.randn(wc.shape)
    wc.backward(g)
    neuronsim.clear_op_tracking()
    xd.unfold(dim, size, step).backward(g.to("neuron"))
    assert "aten::unfold_backward" in base_names(neuronsim.get_executed_ops())
    assert not neuronsim.get_fallback_ops(), neuronsim.get_fallback_ops()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=1e-5, atol=1e-6)
    # loss.sum() hands the backward an expanded gradient: still native.
    xd.grad = None
    neuronsim.clear_op_tracking()
    xd.unfold(dim, size, step).sum().backward()
    assert "aten::unfold_backward" not in base_names(neuronsim.get_fallback_ops())
    xc.grad = None
    xc.unfold(dim, size, step).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)


def test_integer_division_semantics_match_cpu():
    """Floor and trunc division of negative integers, Python's // on int64, and the CPU's
    ZeroDivisionError for an integer divisor of zero; floats divide by zero to inf/nan."""
    a = torch.tensor([-7, -6, -1, 0, 1, 6, 7], dtype=torch.int64)
    b = torch.tensor([2, -4, 3, -5, 3, -4, -2], dtype=torch.int64)
    neuronsim.clear_op_tracking()
    for fn in [
        lambda x, y: x // y,
        lambda x, y: x // 2,
        lambda x, y: torch.div(x, y, rounding_mode="trunc"),
        lambda x, y: torch.div(x, -3, rounding_mode="floor"),
        lambda x, y: torch.floor_divide(x.int(), y.int()),
    ]:
        assert torch.equal(fn(a.to("neuron"), b.to("neuron")).cpu(), fn(a, b))
    x = a.to("neuron")
    x //= 3
    assert torch.equal(x.cpu(), a // 3)
    assert base_names(neuronsim.get_fallback_ops()) & FAMILY == set()
    for divisor in (torch.zeros(7, dtype=torch.int64), 0):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            a // divisor
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            a.to("neuron") // (to_neuron(divisor) if isinstance(divisor, torch.Tensor) else divisor)
    f = torch.tensor([-1.5, 0.0, 2.0, float("nan")])
    for mode in ("floor", "trunc"):
        got = torch.div(f.to("neuron"), 0.0, rounding_mode=mode).cpu()
        torch.testing.assert_close(got, torch.div(f, 0.0, rounding_mode=mode), equal_nan=True)


def test_moe_integer_routing_runs_native():
    """HF-style routing: expert ids // experts_per_rank, % and bincount-free one-hot."""
    torch.manual_seed(0)
    logits = torch.randn(16, 8)
    neuronsim.clear_op_tracking()

    def route(lg):
        top = torch.topk(lg.softmax(-1), 2, dim=-1).indices
        group = top // 4
        slot = top - group * 4
        hit = torch.isin(top, torch.tensor([1, 5], device=lg.device))
        return group, slot, hit, top >> 1, top << 2

    for g, w in zip(route(logits.to("neuron")), route(logits), strict=True):
        assert torch.equal(g.cpu(), w)
    assert base_names(neuronsim.get_fallback_ops()) & FAMILY == set()


def test_flip_roll_training_step_matches_cpu():
    torch.manual_seed(0)
    lin = torch.nn.Linear(12, 12)
    x = torch.randn(5, 12)
    results = []
    for dev in ("cpu", "neuron"):
        m = torch.nn.Linear(12, 12).to(dev)
        m.load_state_dict(lin.state_dict())
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        neuronsim.clear_op_tracking()
        for _ in range(2):
            y = m(x.to(dev))
            loss = F.mse_loss(torch.roll(y.flip(-1), 3, 0), torch.linspace(-1, 1, 12, device=dev))
            opt.zero_grad()
            loss.backward()
            opt.step()
        results.append((loss.detach().cpu(), m.weight.detach().cpu()))
        if dev == "neuron":
            assert neuronsim.get_fallback_ops() == set()
    torch.testing.assert_close(results[0], results[1])


def test_eye_linspace_and_large_shapes():
    for fn in [
        lambda d: torch.eye(300, 140, device=d),
        lambda d: torch.eye(7, dtype=torch.int32, device=d),
        lambda d: torch.linspace(-3, 7.5, 5000, device=d),
        lambda d: torch.logspace(-2, 2, 100, base=2.0, device=d),
        lambda d: torch.arange(3000.0, device=d).view(30, 100).t().flip(0, 1),
        lambda d: torch.arange(3000, device=d).view(30, 100).roll((7, -31), (0, 1)),
        lambda d: torch.arange(50, device=d).view(5, 10).roll(13),
    ]:
        neuronsim.clear_op_tracking()
        torch.testing.assert_close(fn("neuron").cpu(), fn("cpu"))
        assert neuronsim.get_fallback_ops() == set()


def test_complex_zero_fill_is_native():
    """Zero-filling needs no complex arithmetic: the tensor is zeroed as its real view (zero_
    decomposes to fill_(0)); other complex ops keep the CPU fallback."""
    neuronsim.clear_op_tracking()
    z = torch.zeros(4, 3, dtype=torch.complex64, device="neuron")
    w = torch.full((5,), 1 + 2j, dtype=torch.complex64).to("neuron")
    w.zero_()
    assert torch.equal(z.cpu(), torch.zeros(4, 3, dtype=torch.complex64))
    assert torch.equal(w.cpu(), torch.zeros(5, dtype=torch.complex64))
    assert "aten::zero_" in neuronsim.get_executed_ops()
    assert neuronsim.get_fallback_ops() == set()
