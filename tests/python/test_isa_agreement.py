"""ISA mode and fast mode agree for every kernel family of the library.

In fast mode an op's values come from ATen on the host and its ISA program runs through the
timing model only; in ISA mode the same program computes the values on the simulated engines
(neuronsim._C._set_isa_mode) into outputs that start poisoned (NaN, or 0xA5 bytes), without the
CPU kernel running, so a program that writes nothing or an op that took the CPU fallback fails
here. Each ISA run must take no fallback and keep host values only where ISA_HOST lists them
(docs/design.md, "ISA mode"). The two must agree: exactly where the device rounding equals the
host's (copies, selects, integer math, fp32 elementwise ALU ops), and to fp32 rounding
differences elsewhere (summation order in reductions and matmul accumulation, libm vs device
activation evaluation).
"""

import neuronsim
import pytest
import torch
import torch.nn.functional as F
from neuronsim import _C

# Ops whose values ISA mode still takes from the host (or, for ops no Meta kernel sizes, whose
# output sizes), per case: {op: why}. Anything else must come from the programs.
_I64 = "host values (64-bit data)"
ISA_HOST = {
    "argmax": {"aten::argmax": _I64},
    "max_dim": {"aten::max.dim": _I64},
    "cross_entropy": {
        "aten::arange.start_out": _I64,
        "aten::remainder.Tensor": _I64,
    },
    "count_nonzero": {
        "aten::count_nonzero.dim_IntList": _I64,
        "aten::cat": _I64,
    },
    "fused_sgd_nesterov": {
        "aten::_fused_sgd_": "outputs sized by the CPU kernel (no usable Meta kernel)"
    },
}


def _isa_ran_native(name):
    assert not neuronsim.get_fallback_ops(), f"{name}: took the CPU fallback in ISA mode"
    assert dict(_C._isa_host_ops()) == ISA_HOST.get(name, {}), f"{name}: host values in ISA mode"


def _equal(f, i):
    # Bools compared as bytes: a poisoned bool (0xA5) is not a canonical True.
    if f.dtype == torch.bool:
        return torch.equal(f.view(torch.uint8), i.view(torch.uint8))
    return torch.equal(f, i)


torch.manual_seed(0)
X = torch.randn(37, 300)
Y = torch.randn(37, 300)
W = torch.randn(300, 70)
LW = torch.randn(300)
LB = torch.randn(300)
XB = torch.tensor([-3.0, 3.0, -0.5, 0.5, -2.999, 2.999, 0.0])  # activation boundaries
IDX = torch.tensor([3, 1, 3, 0])
SIGNED_ZEROS = torch.tensor([-0.0, 0.0, 2.0, -3.0, float("nan"), -float("inf")])
B1 = torch.randn(3, 20, 130)
B2 = torch.randn(3, 130, 40)
# A contraction longer than one staging stripe (2048 fp32 columns) of the natural-layout path.
LK1 = torch.randn(20, 2100)
LK2 = torch.randn(2100, 30)
# Feature maps and conv weights (CNN kernel families).
IMG = torch.randn(2, 6, 11, 10)
CW = torch.randn(8, 3, 3, 3)
IMG1 = torch.randn(2, 4, 23)
IMG3 = torch.randn(1, 3, 5, 6, 7)
RM = torch.randn(6)
RV = torch.rand(6) + 0.5
BIG = torch.randn(4, 6, 56, 56)  # streams through SBUF (not resident) in batch norm
SCAT_I = torch.tensor([[4, 4, 3, 0, 1], [2, 0, 4, 2, 4], [3, 4, 0, 0, 1]])  # repeats
NLL_T = torch.arange(37) * 7 % 300
NLL_T[::5] = 4  # ignore_index in some cases


def _bn_train(x, rm, rv):
    y = F.batch_norm(x, rm, rv, rm * 0.5 + 1, rv - 1, training=True, momentum=0.2)
    return y, rm, rv


def _bn_grads(x, rm, rv, training):
    x.requires_grad_()
    w = (rv * 2).requires_grad_()
    y = F.batch_norm(x, rm, rv, w, rm + 1, training=training)
    return torch.autograd.grad((y * y).sum(), (x, w))


EXACT = 0.0
FP32 = 1e-5  # relative to the largest magnitude of the result


def _nan_inf(t):
    # NaN never equals itself: compare where the NaNs and infinities are.
    return torch.stack([t.isnan(), t.isinf(), t.isfinite()])


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
    # ~ of a bool is logical not; of a uint8 it flips 8 bits (x ^ -1 saturated to 0 on the store)
    "bitwise_not_bool_uint8_int8": (
        lambda a: torch.cat(
            [
                (~(a > 0)).view(torch.uint8),
                ~(a.abs() * 50).to(torch.uint8),
                (~(a * 25).to(torch.int8)).view(torch.uint8),
            ]
        ),
        (X,),
        EXACT,
    ),
    "glu": (lambda a: torch.cat([F.glu(a, -1).flatten(), F.glu(a[:36], 0).flatten()]), (X,), FP32),
    "glu_backward": (
        lambda a: torch.autograd.grad(F.glu(a.requires_grad_(), 0).square().sum(), a)[0],
        (X[:36],),
        FP32,
    ),
    "xlogy_kl_div": (
        lambda a, b: torch.cat(
            [
                torch.xlogy(a.relu(), b.abs()).flatten(),
                F.kl_div(a.log_softmax(-1), b.softmax(-1), reduction="batchmean")[None],
            ]
        ),
        (X, Y),
        FP32,
    ),
    "count_nonzero": (
        lambda a: torch.cat([torch.count_nonzero(a > 0, 1), torch.count_nonzero(a.relu())[None]]),
        (X,),
        EXACT,
    ),
    "aminmax": (
        lambda a: torch.cat([*torch.aminmax(a, dim=1), torch.stack(torch.aminmax(a))]),
        (X,),
        EXACT,
    ),
    "int_arith": (lambda a: (a * 1000).to(torch.int32) * 3 + 7, (X,), EXACT),
    "bf16_add": (lambda a, b: a.bfloat16() + b.bfloat16(), (X, Y), EXACT),
    "broadcast_row": (lambda a, b: a * b[0], (X, Y), EXACT),
    "div_floor_trunc": (
        lambda a, b: torch.stack(
            [
                a // b,
                torch.div(a * 9, b, rounding_mode="floor"),
                torch.div(a, b, rounding_mode="trunc"),
            ]
        ),
        (X, Y),
        EXACT,
    ),
    "floor_divide_int": (
        lambda a, b: torch.stack(
            [
                (a * 100).int() // ((b * 10).int() | 1),
                torch.div((a * 100).int(), -7, rounding_mode="trunc"),
            ]
        ),
        (X, Y),
        EXACT,
    ),
    "shifts_int": (
        lambda a, b: torch.stack(
            [(a * 1e4).int() >> ((b * 20).int()), (a * 1e4).int() << ((b * 20).int() % 40)]
        ),
        (X, Y),
        EXACT,
    ),
    "erfinv": (lambda a: torch.erfinv(torch.tanh(a)), (X,), FP32),
    "isin": (
        lambda a, b: torch.stack(
            [
                torch.isin((a * 3).round(), (b[:2, :50] * 3).round()),
                torch.isin((a * 3).round(), 1.0),
            ]
        ),
        (X, Y),
        EXACT,
    ),
    "mse_loss": (
        lambda a, b: torch.stack([F.mse_loss(a, b), F.mse_loss(a, b[0], reduction="sum") / 1e3]),
        (X, Y),
        FP32,
    ),
    "mse_loss_backward": (
        lambda a, b: torch.autograd.grad(F.mse_loss(a.requires_grad_(), b), a)[0],
        (X, Y),
        EXACT,
    ),
    "exp": (torch.exp, (X,), FP32),
    "sigmoid_tanh": (lambda a: torch.sigmoid(a) + torch.tanh(a), (X,), FP32),
    "gelu": (F.gelu, (X,), FP32),
    "gelu_tanh": (lambda a: F.gelu(a, approximate="tanh"), (X,), FP32),
    "silu": (F.silu, (X,), FP32),
    "rsqrt": (lambda a: torch.rsqrt(a.abs() + 1), (X,), FP32),
    # signed zeros and NaN: 1/-0 = -inf, rsqrt(-0) = -inf, sign(-0) = sign(NaN) = +0 (the bits)
    "signed_zeros": (
        lambda a: torch.cat([torch.reciprocal(a), 2.0 / a, torch.rsqrt(a), torch.sign(a)])
        .nan_to_num(nan=7.0)
        .view(torch.int32),
        (SIGNED_ZEROS,),
        EXACT,
    ),
    # copies and movement
    "transpose_copy": (lambda a: a.t().contiguous(), (X,), EXACT),
    "cast_copy": (lambda a: a.to(torch.float16), (X,), EXACT),
    # to bool is x != 0 (0.5, -2, nan and 1e-30 are True), not a numeric conversion
    "cast_bool": (
        lambda a: torch.cat([a * 0.01, a.new_tensor([0.5, -2.0, float("nan"), 1e-30, 0.0])]).bool(),
        (X[0],),
        EXACT,
    ),
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
    # index_add's alpha scales the source; scatter's reduce accumulates or multiplies in
    "index_add_alpha": (
        lambda a: a.index_add(0, IDX.to(a.device), a[:4] * 0.5, alpha=-3),
        (X,),
        FP32,
    ),
    "scatter_reduce_arg": (
        lambda a: torch.stack(
            [
                a[:5, :5].scatter(0, SCAT_I.to(a.device), a[5:10, :5], reduce=r)
                for r in ("add", "multiply")
            ]
        ),
        (X,),
        FP32,
    ),
    "index_copy": (
        lambda a: a.index_copy(0, IDX[1:].to(a.device), torch.ones(3, 300, device=a.device)),
        (X,),
        EXACT,
    ),
    "flip_roll": (
        lambda a: torch.cat([a.flip(0, 1), a.t().flip(0).t(), a.roll((5, -70), (0, 1))]),
        (X,),
        EXACT,
    ),
    "roll_flat_int": (lambda a: (a * 100).int().roll(1234), (X,), EXACT),
    "eye": (lambda: torch.eye(150, 70, device="neuron"), (), EXACT),
    "linspace_logspace": (
        lambda: torch.stack(
            [
                torch.linspace(-3, 7.5, 1000, device="neuron"),
                torch.logspace(-2, 2, 1000, base=2, device="neuron"),
            ]
        ),
        (),
        FP32,
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
    # outer dims: contiguous rows transposed on TensorE (column_reduce.cpp)
    "outer_dim_reductions": (
        lambda a: torch.cat(
            [a.amax(0), a.amin(0), a.var(0), a.std(0, correction=0), torch.var_mean(a, 0)[0]]
        ),
        (X,),
        FP32,
    ),
    "middle_dim_reductions": (
        lambda a: torch.cat([a.amax(1).flatten(), a.prod(1).flatten(), a.std(1).flatten()]),
        (B1,),
        FP32,
    ),
    # empty reductions: the op's identity (sum 0, prod 1, any False, all True), mean NaN
    "empty_reductions": (
        lambda a: torch.stack(
            [a[:0].sum(), a[:0].prod(), a[:0, 0].sum(), a[:0, 0].prod()]
            + list(a[:, :0].prod(1)[:2])
            + [a[:0].any().float(), a[:0].all().float(), a[:, :0].all(1).float().sum()]
        ),
        (X,),
        EXACT,
    ),
    "empty_mean": (
        lambda a: _nan_inf(torch.cat([a[:, :0].mean(1), torch.var_mean(a[:, :0], 1)[1]])),
        (X,),
        EXACT,
    ),
    # no degrees of freedom: sum / max(0, n - correction) is NaN (zero sum) or inf
    "var_no_dof": (
        lambda a: _nan_inf(
            torch.stack(
                [
                    a[0, 0].var(),
                    a[:, :1].std(1).sum(),
                    a[0, :2].var(correction=3),
                    torch.std_mean(a[0, 0])[0],
                ]
            )
        ),
        (X,),
        EXACT,
    ),
    # a permuted but dense input (strides (130, 2600, 1)): value reductions in memory order
    "permuted_reductions": (
        lambda a: torch.stack([a.sum(), a.mean(), a.var(), a.amax(), a.sum((0, 1)).sum()]),
        (B1.permute(1, 0, 2),),
        FP32,
    ),
    "vector_norms": (
        lambda a: torch.stack(
            [torch.linalg.vector_norm(a, o, 1) for o in (2, 1, 0, float("inf"), -float("inf"), 3.5)]
        ),
        (X,),
        FP32,
    ),
    # scans (one tensor_tensor per column) along either dim
    "cumsum": (lambda a: torch.cumsum(a, 1) + torch.cumsum(a, 0), (X,), FP32),
    "cumprod": (lambda a: torch.cumprod(1 + a * 0.01, 1), (X,), FP32),
    "cumsum_int": (
        lambda a: torch.cumsum((a * 100).to(torch.int32), 0, dtype=torch.int32),
        (X,),
        EXACT,
    ),
    "vector_norm_all": (lambda a: torch.linalg.vector_norm(a, 0.5), (X,), FP32),
    "any_all": (lambda a: torch.stack([(a > 2).any(1), (a > -3).all(1)]), (X,), EXACT),
    # matmul
    "mm": (torch.mm, (X, W), FP32),
    # FP8 (double-row on trn2); sizes the Meta kernel accepts (K and N multiples of 16)
    "scaled_mm": (
        lambda a, b, bias: torch._scaled_mm(
            a[:, :288].to(torch.float8_e4m3fn),
            b[:288, :64].t().contiguous().to(torch.float8_e4m3fn).t(),
            torch.tensor(0.5, device=a.device),
            torch.tensor(2.0, device=a.device),
            bias=bias[:64],
            out_dtype=torch.float32,
        ),
        (X, W, LB),
        FP32,
    ),
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
    # where(rows, 0, out, out=out): an out= argument also read as an input is not poisoned
    "safe_softmax_causal": (
        lambda a: torch.ops.aten._safe_softmax(
            a[:, :37].masked_fill(
                torch.ones(37, 37, dtype=torch.bool).triu(1).to(a.device), float("-inf")
            ),
            -1,
        ),
        (X,),
        FP32,
    ),
    "log_softmax_dim0": (lambda a: a.log_softmax(0), (X,), FP32),
    "layer_norm": (lambda a, w, b: _ln(a, w, b), (X, LW, LB), FP32),
    "layer_norm_plain": (lambda a: F.layer_norm(a, (300,)), (X,), FP32),
    # convolution (shifted matmuls on TensorE)
    "conv2d_groups_stride": (
        lambda x, w: F.conv2d(x, w, torch.ones(8, device=x.device), stride=2, padding=1, groups=2),
        (IMG, CW),
        FP32,
    ),
    "conv1d_dilated": (
        lambda x: F.conv1d(x, torch.ones(5, 4, 3, device=x.device) * 0.5, dilation=2),
        (IMG1,),
        FP32,
    ),
    "conv3d": (
        lambda x: F.conv3d(x, torch.full((4, 3, 2, 3, 3), 0.1, device=x.device), padding=1),
        (IMG3,),
        FP32,
    ),
    "conv_transpose2d": (
        lambda x, w: F.conv_transpose2d(x, w[:6], stride=2, padding=1, output_padding=1),
        (IMG, CW),
        FP32,
    ),
    "conv2d_backward": (
        lambda x, w: torch.autograd.grad(
            F.conv2d(x.requires_grad_(), w.requires_grad_(), padding=1, groups=2).square().sum(),
            (x, w),
        ),
        (IMG, CW),
        FP32,
    ),
    # batch norm (channels on partitions; running statistics updated in place)
    "batch_norm_train": (_bn_train, (IMG, RM, RV), FP32),
    "batch_norm_train_streamed": (_bn_train, (BIG, RM, RV), FP32),
    "batch_norm_eval": (
        lambda x, rm, rv: F.batch_norm(x, rm, rv, rv, rm),
        (IMG1[:, :2].repeat(1, 3, 1), RM, RV),
        FP32,
    ),
    "batch_norm_backward": (lambda x, rm, rv: _bn_grads(x, rm, rv, True), (BIG, RM, RV), 1e-4),
    "batch_norm_backward_eval": (
        lambda x, rm, rv: _bn_grads(x, rm, rv, False),
        (IMG, RM, RV),
        FP32,
    ),
    # group norm (rows (n, g) on partitions; parameters broadcast and gradients summed on TensorE)
    "group_norm": (lambda x, rm, rv: F.group_norm(x, 3, rv, rm), (IMG, RM, RV), FP32),
    "group_norm_backward": (
        lambda x, rm, rv: torch.autograd.grad(
            F.group_norm(x.requires_grad_(), 2, rv.requires_grad_(), rm.requires_grad_())
            .square()
            .sum(),
            (x, rv, rm),
        ),
        (BIG, RM, RV),
        1e-4,
    ),
    # upsampling (planes on partitions; segment copies, bilinear weights from an iota)
    "upsample_nearest2d": (lambda x: F.interpolate(x, size=(17, 23)), (IMG,), EXACT),
    "upsample_bilinear2d_backward": (
        lambda x: torch.autograd.grad(
            F.interpolate(x.requires_grad_(), scale_factor=2, mode="bilinear").square().sum(), x
        )[0],
        (IMG,),
        FP32,
    ),
    # pooling (max pooling returns int64 indices, so ISA mode keeps its host values)
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 3, 2, 1), (IMG,), FP32),
    "avg_pool2d_no_pad_count": (
        lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        (IMG,),
        FP32,
    ),
    "avg_pool3d": (lambda x: F.avg_pool3d(x, 2, padding=1), (IMG3,), FP32),
    "adaptive_avg_pool1d": (lambda x: F.adaptive_avg_pool1d(x[..., :22], 11), (IMG1,), FP32),
    "avg_pool2d_backward": (
        lambda x: torch.autograd.grad(
            F.avg_pool2d(x.requires_grad_(), 3, 2, 1, count_include_pad=False).square().sum(), x
        )[0],
        (IMG,),
        FP32,
    ),
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
    "softplus_backward": (
        lambda a: torch.autograd.grad(F.softplus(a.requires_grad_() * 8, beta=2).sum(), a)[0],
        (X,),
        FP32,
    ),
    # Mobile-CNN activations and their gradients; X * 4 crosses every bound, and XB holds the
    # bounds themselves (+-3, +-lambd), where the CPU's < and <= decide.
    "hardswish_hardsigmoid": (
        lambda a, b: torch.cat(
            [
                (F.hardswish(a * 4) + F.hardsigmoid(a * 4) * 3).flatten(),
                F.hardswish(b),
                F.hardsigmoid(b),
            ]
        ),
        (X, XB),
        FP32,
    ),
    "hardswish_hardsigmoid_backward": (
        lambda a, b: torch.cat(
            [
                g.flatten()
                for g in torch.autograd.grad(
                    (F.hardswish(a.requires_grad_() * 4) * F.hardsigmoid(a * 3)).sum()
                    + (F.hardswish(b.requires_grad_()) + F.hardsigmoid(b)).sum(),
                    (a, b),
                )
            ]
        ),
        (X, XB),
        FP32,
    ),
    "elu_selu_celu": (lambda a: F.elu(a * 3, 0.7) + F.selu(a) + F.celu(a, 1.3), (X,), FP32),
    "elu_backward": (
        lambda a: torch.autograd.grad((F.elu(a.requires_grad_() * 3, 0.7) ** 2).sum(), a)[0]
        + torch.autograd.grad(F.elu(a * 2, inplace=False).sum(), a)[0],
        (X,),
        FP32,
    ),
    "shrinks": (
        lambda a, b: torch.cat(
            [
                (F.hardshrink(a, 0.5) + F.softshrink(a * 2, 0.5)).flatten(),
                F.hardshrink(b, 0.5),
                F.softshrink(b, 0.5),
            ]
        ),
        (X, XB),
        FP32,
    ),
    "shrinks_backward": (
        lambda a: torch.autograd.grad(
            (F.hardshrink(a.requires_grad_(), 0.5) * F.softshrink(a * 2, 0.5)).sum(), a
        )[0],
        (X,),
        FP32,
    ),
    "log10_round_decimals": (
        lambda a: torch.log10(a.abs() + 0.01)
        + torch.round(a * 7, decimals=2)
        + torch.round(a * 700, decimals=-1),
        (X,),
        FP32,
    ),
    "nan_to_num": (
        # NaN (0 / 0), +-inf (1e38 * 1e38 where a > 0) and finite values, all exact on both paths.
        lambda a: torch.cat(
            [
                torch.nan_to_num(v) + torch.nan_to_num(v, 1.5, 7.0, -8.0)
                for v in ((a - a) / (a - a), (a > 0) * 1e38 * 1e38 + a, a - (a > 0) * 1e38 * 1e38)
            ]
        ),
        (X,),
        EXACT,
    ),
    "log_sigmoid_forward": (
        lambda a: torch.ops.aten.log_sigmoid_forward(a * 10),  # the output and its buffer
        (X,),
        FP32,
    ),
    # Pointwise losses: elementwise (none) or an expression summed on the device (mean, sum).
    "bce_smooth_l1_huber": (
        lambda a, b, w: torch.stack(
            [
                F.binary_cross_entropy(a.sigmoid(), b.sigmoid(), reduction=r).sum()
                + F.binary_cross_entropy(a.sigmoid(), b.sigmoid(), w.abs(), reduction=r).sum()
                + F.smooth_l1_loss(a, b, reduction=r, beta=0.7).sum()
                + F.smooth_l1_loss(a, b, reduction=r, beta=0.0).sum()
                + F.huber_loss(a, b, reduction=r, delta=1.3).sum()
                for r in ("none", "mean", "sum")
            ]
        ),
        (X, Y, LW),
        FP32,
    ),
    # Their backwards are .grad_input kernels under composite functionals; bf16 outputs too.
    "smooth_l1_huber_backward": (
        lambda a, b: torch.stack(
            [
                torch.autograd.grad(
                    loss(a.to(dt).requires_grad_(), b.to(dt), reduction=r, **kw), a
                )[0]
                for dt in (torch.float32, torch.bfloat16)
                for loss, kw in (
                    (F.smooth_l1_loss, {"beta": 0.7}),
                    (F.smooth_l1_loss, {"beta": 0.0}),
                    (F.huber_loss, {"delta": 1.3}),
                )
                for r in ("mean", "sum")
            ]
        ).float(),
        (X, Y),
        FP32,
    ),
    "bce_backward": (
        lambda a, b, w: torch.stack(
            [
                torch.ops.aten.binary_cross_entropy_backward(
                    a.abs() + 0.5, a.sigmoid(), b.sigmoid(), None, 0
                ),
                torch.ops.aten.binary_cross_entropy_backward(
                    torch.full((), 0.7, device=a.device), a.sigmoid(), b.sigmoid(), w.abs(), 1
                ),
            ]
        ),
        (X, Y, LW),
        FP32,
    ),
    "unfold_backward": (
        lambda a: torch.autograd.grad(a.requires_grad_().unfold(1, 7, 3).square().sum(), a)[0],
        (X,),
        FP32,
    ),
    "sgn": (lambda a: torch.sgn(a.masked_fill(a.abs() < 0.3, 0)), (X,), EXACT),
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
    # nll_loss: the target's log-prob gathered, weighted, ignore_index rows zero, each reduction
    "nll_loss_weighted_ignore": (
        lambda a, w: torch.stack(
            [
                F.nll_loss(a, NLL_T.to(a.device), w, ignore_index=4),
                F.nll_loss(a, NLL_T.to(a.device), w, reduction="sum", ignore_index=4),
                F.nll_loss(a, NLL_T.to(a.device), reduction="none", ignore_index=4).sum(),
                F.nll_loss(a[3], NLL_T[3].to(a.device)),
            ]
        ),
        (X, LW.abs()),
        FP32,
    ),
    "nll_loss_none": (
        lambda a, w: F.nll_loss(a, NLL_T.to(a.device), w, reduction="none", ignore_index=4),
        (X, LW.abs()),
        EXACT,
    ),
    "nll_loss_backward": (
        lambda a, w: torch.autograd.grad(
            F.nll_loss(a.requires_grad_(), NLL_T.to(a.device), w, ignore_index=4), a
        )[0],
        (X, LW.abs()),
        FP32,
    ),
    "nll_loss_backward_none": (
        lambda a: torch.autograd.grad(
            F.nll_loss(a.requires_grad_(), NLL_T.to(a.device), reduction="none").square().sum(), a
        )[0],
        (X,),
        EXACT,
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
        neuronsim.clear_op_tracking()
        isa = _run(fn, args)
    finally:
        _C._set_isa_mode(False)
    _isa_ran_native(name)
    for f, i in zip(fast, isa, strict=True):
        assert f.shape == i.shape and f.dtype == i.dtype
        if tol == EXACT:
            assert _equal(f, i), f"{name}: ISA mode differs from fast mode"
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
        saved = torch.neuron.get_rng_state()
        torch.neuron.set_rng_state(_philox_region(1234, 7))
        _C._set_philox_region(0, True)  # as DTensor's tracker opens it (_dtensor_rng.py)
        try:
            a = torch.rand(1000, device="neuron")
            b = torch.randn(3, 333, device="neuron")
            c = torch.randint(0, 17, (500,), device="neuron", dtype=torch.int32)
            outs.append([t.cpu() for t in (a, b, c)])
        finally:
            _C._set_philox_region(0, False)
            torch.neuron.set_rng_state(saved)
            _C._set_isa_mode(False)
    for f, i in zip(*outs, strict=True):
        assert torch.allclose(f.double(), i.double(), rtol=1e-6, atol=1e-6)


# Multi-tensor programs (one launch over a list): the foreach ops, the fused optimizers and the
# GradScaler pair, over lists of differently shaped tensors.
def _lists():
    torch.manual_seed(1)
    shapes = [(37, 300), (5,), (130, 2)]
    return [torch.randn(s) for s in shapes], [torch.randn(s) for s in shapes]


def _one(v, dev="neuron"):
    return torch.tensor(v, device=dev)


def _fused_adam(fn, amsgrad=False, scaled=False, maximize=False):
    def run(ps, gs):
        torch.manual_seed(2)
        dev = ps[0].device
        # Drawn on the CPU: ISA mode's random ops draw their own stream (docs/neuron-device.md).
        m = [torch.randn(p.shape).to(dev) for p in ps]
        v = [torch.rand(p.shape).to(dev) for p in ps]
        vmax = [torch.rand(p.shape).to(dev) for p in ps] if amsgrad else []
        steps = [_one(3.0, dev) for _ in ps]
        kw = {"grad_scale": _one(2.0, dev), "found_inf": _one(0.0, dev)} if scaled else {}
        fn(ps, gs, m, v, vmax, steps, lr=0.01, beta1=0.9, beta2=0.99, weight_decay=0.1, eps=1e-8,
           amsgrad=amsgrad, maximize=maximize, **kw)  # fmt: skip
        return ps + gs + m + v + vmax

    return run


def _fused_sgd(ps, gs):
    bufs = [g * 0.5 for g in gs]
    torch._fused_sgd_(ps, gs, bufs, weight_decay=0.01, momentum=0.9, lr=0.1, dampening=0.1,
                      nesterov=True, maximize=False, is_first_step=False)  # fmt: skip
    return ps + bufs


def _unscale(ps, gs, inf=False):
    if inf:
        ps[1][2] = float("inf")
    found = torch.zeros(1, device=ps[0].device)
    torch._amp_foreach_non_finite_check_and_unscale_(ps, found, _one([0.5], ps[0].device))
    return ps + [found]


def _update_scale(found):
    def run(ps, gs):
        dev = ps[0].device
        s, t = _one([4.0], dev), torch.tensor([1], dtype=torch.int32, device=dev)
        torch._amp_update_scale_(s, t, _one([found], dev), 2.0, 0.5, 2)
        return [s, t]

    return run


MULTI_TENSOR_CASES = {
    "foreach_add_alpha": (lambda a, b: torch._foreach_add(a, b, alpha=2), EXACT),
    "foreach_mul_tensor": (lambda a, b: torch._foreach_mul(a, b[1][0]), EXACT),
    "foreach_div_scalarlist": (lambda a, b: torch._foreach_div(a, [1.5, 2.0, 3.0]), EXACT),
    "foreach_maximum": (torch._foreach_maximum, EXACT),
    "foreach_sign": (lambda a, b: torch._foreach_sign(a), EXACT),
    "foreach_zero_copy": (
        lambda a, b: (torch._foreach_zero_(a), torch._foreach_copy_(b, a), b)[2],
        EXACT,
    ),
    "foreach_lerp": (lambda a, b: torch._foreach_lerp(a, b, 0.3), FP32),
    "foreach_addcdiv": (
        lambda a, b: torch._foreach_addcdiv(
            a, a, torch._foreach_add(torch._foreach_abs(b), 1), 0.3
        ),
        FP32,
    ),
    "foreach_sqrt_pow": (
        lambda a, b: torch._foreach_sqrt(torch._foreach_pow(torch._foreach_abs(a), 1.5)),
        FP32,
    ),
    "foreach_norms": (
        lambda a, b: [torch.stack(torch._foreach_norm(a, o)) for o in (2, 1, float("inf"))],
        FP32,
    ),
    "foreach_max": (lambda a, b: torch._foreach_max(a), EXACT),
    "fused_adamw": (_fused_adam(torch._fused_adamw_), FP32),
    "fused_adamw_scaled": (_fused_adam(torch._fused_adamw_, scaled=True), FP32),
    "fused_adam_amsgrad_maximize": (_fused_adam(torch._fused_adam_, True, False, True), FP32),
    "fused_sgd_nesterov": (_fused_sgd, FP32),
    "amp_unscale": (_unscale, EXACT),
    "amp_unscale_inf": (lambda a, b: _unscale(a, b, inf=True), EXACT),
    "amp_update_scale": (_update_scale(0.0), EXACT),
    "amp_update_scale_found_inf": (_update_scale(1.0), EXACT),
}


@pytest.mark.parametrize("name", sorted(MULTI_TENSOR_CASES))
def test_multi_tensor_isa_mode_agrees_with_fast_mode(name):
    fn, tol = MULTI_TENSOR_CASES[name]
    outs = []
    try:
        for isa in (False, True):
            _C._set_isa_mode(isa)
            a, b = _lists()
            neuronsim.clear_op_tracking()
            out = fn([t.to("neuron") for t in a], [t.to("neuron") for t in b])
            outs.append([t.detach().cpu() for t in out])
    finally:
        _C._set_isa_mode(False)
    _isa_ran_native(name)
    for f, i in zip(*outs, strict=True):
        assert f.shape == i.shape and f.dtype == i.dtype
        if tol == EXACT:
            assert _equal(f, i), f"{name}: ISA mode differs from fast mode"
        else:
            scale = max(f.double().abs().max().item(), 1.0)
            err = (f.double() - i.double()).abs().max().item()
            assert err <= tol * scale, f"{name}: max error {err} > {tol} x {scale}"


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
