"""ISA mode and fast mode agree for every kernel family of the library.

In fast mode an op's values come from ATen on the host and its ISA program runs through the
timing model only; in ISA mode the same program computes the values on the simulated engines
(neuronsim._C._set_isa_mode). The two must agree: exactly where the device rounding equals the
host's (copies, selects, integer math, fp32 elementwise ALU ops), and to fp32 rounding
differences elsewhere (summation order in reductions and matmul accumulation, libm vs device
activation evaluation).
"""

import pytest
import torch
import torch.nn.functional as F
from neuronsim import _C

torch.manual_seed(0)
X = torch.randn(37, 300)
Y = torch.randn(37, 300)
W = torch.randn(300, 70)
LW = torch.randn(300)
LB = torch.randn(300)
IDX = torch.tensor([3, 1, 3, 0])
B1 = torch.randn(3, 20, 130)
B2 = torch.randn(3, 130, 40)
# A contraction longer than one staging stripe (2048 fp32 columns) of the natural-layout path.
LK1 = torch.randn(20, 2100)
LK2 = torch.randn(2100, 30)

EXACT = 0.0
FP32 = 1e-5  # relative to the largest magnitude of the result


def _ln(a, w, b):
    return F.layer_norm(a, (300,), w, b)


CASES = {
    # elementwise
    "add_alpha": (lambda a, b: torch.add(a, b, alpha=2), (X, Y), EXACT),
    "mul": (torch.mul, (X, Y), EXACT),
    "div": (torch.div, (X, Y), EXACT),
    "maximum": (torch.maximum, (X, Y), EXACT),
    "where": (lambda a, b: torch.where(a > 0, a, b), (X, Y), EXACT),
    "masked_fill": (lambda a: a.masked_fill(a < 0, -1.5), (X,), EXACT),
    "clamp": (lambda a: a.clamp(-0.5, 0.7), (X,), EXACT),
    "relu": (torch.relu, (X,), EXACT),
    "abs_neg": (lambda a: -a.abs(), (X,), EXACT),
    "floor_ceil_round": (lambda a: (a * 3).floor() + (a * 5).ceil() + (a * 7).round(), (X,), EXACT),
    "compare_bool": (lambda a, b: (a < b) | (a == 0), (X, Y), EXACT),
    "int_arith": (lambda a: (a * 1000).to(torch.int32) * 3 + 7, (X,), EXACT),
    "bf16_add": (lambda a, b: a.bfloat16() + b.bfloat16(), (X, Y), EXACT),
    "broadcast_row": (lambda a, b: a * b[0], (X, Y), EXACT),
    "exp": (torch.exp, (X,), FP32),
    "sigmoid_tanh": (lambda a: torch.sigmoid(a) + torch.tanh(a), (X,), FP32),
    "gelu": (F.gelu, (X,), FP32),
    "gelu_tanh": (lambda a: F.gelu(a, approximate="tanh"), (X,), FP32),
    "silu": (F.silu, (X,), FP32),
    "rsqrt": (lambda a: torch.rsqrt(a.abs() + 1), (X,), FP32),
    # copies and movement
    "transpose_copy": (lambda a: a.t().contiguous(), (X,), EXACT),
    "cast_copy": (lambda a: a.to(torch.float16), (X,), EXACT),
    "cat": (lambda a, b: torch.cat([a, b], 1), (X, Y), EXACT),
    # operands stored transposed relative to the output (TensorE transposes), broadcast rows
    "transposed_operands": (lambda a: a.t() * 0.5 + a.t().contiguous(), (X,), EXACT),
    "permuted_copy": (lambda a: a.permute(0, 2, 1).contiguous(), (B1,), EXACT),
    "inner_broadcast": (lambda a: a * a[:, :1] - a.amax(1, keepdim=True), (X,), EXACT),
    "tril_triu": (lambda a: a.tril(2) + a.triu(-3), (X,), EXACT),
    "index_select": (lambda a: a.index_select(0, IDX.to(a.device)), (X,), EXACT),
    "gather": (
        lambda a: a.gather(1, (torch.arange(185).view(37, 5) * 7 % 300).to(a.device)),
        (X,),
        EXACT,
    ),
    "index": (lambda a: a[IDX.to(a.device)], (X,), EXACT),
    "index_put_acc": (
        lambda a: a.index_put(
            (IDX.to(a.device),), torch.ones(4, 300, device=a.device), accumulate=True
        ),
        (X,),
        FP32,
    ),
    "index_copy": (
        lambda a: a.index_copy(0, IDX[1:].to(a.device), torch.ones(3, 300, device=a.device)),
        (X,),
        EXACT,
    ),
    "arange": (lambda: torch.arange(3, 1000, 7, device="neuron", dtype=torch.float32), (), EXACT),
    "fill": (lambda: torch.full((33, 70), 2.5, device="neuron"), (), EXACT),
    # reductions
    "sum_dim": (lambda a: a.sum(-1), (X,), FP32),
    "mean_dim0": (lambda a: a.mean(0), (X,), FP32),
    "sum_all": (lambda a: a.sum(), (X,), FP32),
    "amax_amin": (lambda a: a.amax(1) - a.amin(0).sum(), (X,), FP32),
    "max_dim": (lambda a: a.max(1), (X,), EXACT),
    "argmax": (lambda a: a.argmax(1), (X,), EXACT),
    "var_std": (lambda a: a.var(1) + a.std(), (X,), FP32),
    "any_all": (lambda a: torch.stack([(a > 2).any(1), (a > -3).all(1)]), (X,), EXACT),
    # matmul
    "mm": (torch.mm, (X, W), FP32),
    "mm_transposed_b": (lambda a, b: a @ b.t().contiguous().t(), (X, W), FP32),
    "linear_bias": (lambda a, b: F.linear(a, b.t(), torch.ones(70, device=a.device)), (X, W), FP32),
    "addmm_scaled": (
        lambda a, b: torch.addmm(torch.ones(70, device=a.device), a, b, beta=0.5, alpha=2.0),
        (X, W),
        FP32,
    ),
    "bmm": (torch.bmm, (B1, B2), FP32),
    "mm_long_k_natural": (lambda a, b: a @ b.t().contiguous().t(), (LK1, LK2), 1e-4),
    "bf16_mm": (lambda a, b: a.bfloat16() @ b.bfloat16(), (X, W), 1e-2),
    # normalisation
    "softmax": (lambda a: a.softmax(-1), (X,), FP32),
    "log_softmax_dim0": (lambda a: a.log_softmax(0), (X,), FP32),
    "layer_norm": (lambda a, w, b: _ln(a, w, b), (X, LW, LB), FP32),
    "layer_norm_plain": (lambda a: F.layer_norm(a, (300,)), (X,), FP32),
    # backward kernels
    "softmax_backward": (
        lambda a: torch.autograd.grad(a.requires_grad_().softmax(-1).square().sum(), a)[0],
        (X,),
        FP32,
    ),
    "log_softmax_backward": (
        lambda a: torch.autograd.grad(a.requires_grad_().log_softmax(-1)[:, 0].sum(), a)[0],
        (X,),
        FP32,
    ),
    "layer_norm_backward": (
        lambda a, w, b: torch.autograd.grad(_ln(a.requires_grad_(), w, b).square().sum(), a)[0],
        (X, LW, LB),
        FP32,
    ),
    "gelu_backward": (
        lambda a: torch.autograd.grad(F.gelu(a.requires_grad_()).sum(), a)[0],
        (X,),
        FP32,
    ),
    "embedding_backward": (
        lambda a: torch.autograd.grad(
            F.embedding(torch.tensor([[1, 2], [1, 0]], device=a.device), a.requires_grad_())
            .square()
            .sum(),
            a,
        )[0],
        (X,),
        FP32,
    ),
    "cross_entropy": (
        lambda a: F.cross_entropy(a, torch.arange(37, device=a.device) % 300),
        (X,),
        FP32,
    ),
}


def _run(fn, args):
    dev = [a.to("neuron") if isinstance(a, torch.Tensor) else a for a in args]
    out = fn(*dev)
    return [t.detach().cpu() for t in (out if isinstance(out, tuple | list) else [out])]


@pytest.mark.parametrize("name", sorted(CASES))
def test_isa_mode_agrees_with_fast_mode(name):
    fn, args, tol = CASES[name]
    try:
        _C._set_isa_mode(False)
        fast = _run(fn, args)
        _C._set_isa_mode(True)
        isa = _run(fn, args)
    finally:
        _C._set_isa_mode(False)
    for f, i in zip(fast, isa, strict=True):
        assert f.shape == i.shape and f.dtype == i.dtype
        if tol == EXACT:
            assert torch.equal(f, i), f"{name}: ISA mode differs from fast mode"
        else:
            scale = max(f.double().abs().max().item(), 1.0)
            err = (f.double() - i.double()).abs().max().item()
            assert err <= tol * scale, f"{name}: max error {err} > {tol} x {scale}"


def _philox_region(seed, offset):
    raw = seed.to_bytes(8, "little") + offset.to_bytes(8, "little")
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8)


def test_random_streams_agree_between_modes():
    """The ISA rng instruction draws the same Philox stream the host computes for an offset
    region (outside regions fast mode draws the CPU's mt19937 stream, ISA mode the instruction's
    Philox stream seeded from it)."""
    outs = []
    for isa in (False, True):
        _C._set_isa_mode(isa)
        try:
            saved = torch.neuron.get_rng_state()
            torch.neuron.set_rng_state(_philox_region(1234, 7))
            a = torch.rand(1000, device="neuron")
            b = torch.randn(3, 333, device="neuron")
            c = torch.randint(0, 17, (500,), device="neuron", dtype=torch.int32)
            outs.append([t.cpu() for t in (a, b, c)])
            torch.neuron.set_rng_state(saved)
        finally:
            _C._set_isa_mode(False)
    for f, i in zip(*outs, strict=True):
        assert torch.allclose(f.double(), i.double(), rtol=1e-6, atol=1e-6)


def test_isa_mode_random_is_seeded_by_the_cpu_stream():
    _C._set_isa_mode(True)
    try:
        draws = []
        for _ in range(2):
            torch.manual_seed(5)
            draws.append([torch.rand(300, device="neuron").cpu() for _ in range(2)])
    finally:
        _C._set_isa_mode(False)
    assert torch.equal(draws[0][0], draws[1][0]) and torch.equal(draws[0][1], draws[1][1])
    assert not torch.equal(draws[0][0], draws[0][1])
