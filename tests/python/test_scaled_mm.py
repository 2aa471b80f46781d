"""torch._scaled_mm runs natively: FP8 (e4m3fn, e5m2) matrices, tensor-wise fp32 scales read by
the program, an optional bias, a bf16/fp16/fp32 output, as the kernel library's FP8 matmul
(double-row on trn2, ARCH-v3). In ISA mode the device computes the values, which match the CPU's
_scaled_mm; forms the kernel does not take (row-wise scales, an FP8 output) run through the CPU
fallback with the CPU's values. On trn2 a 2048^3 _scaled_mm keeps TensorE busy about half as
long as the bf16 mm (double-row matmuls contract 256 rows in a BF16 matmul's time).
"""

import json

import neuronsim
import pytest
import torch
from conftest import run_python
from neuronsim import _C

E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2
TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 2e-3}


def _isa(fn):
    _C._set_isa_mode(True)
    try:
        neuronsim.clear_op_tracking()
        return fn().cpu()
    finally:
        _C._set_isa_mode(False)


def _operands(m, k, n, da, db, b_transposed):
    torch.manual_seed(0)
    a = (torch.randn(m, k) * 2).to(da)
    b = (torch.randn(n, k) * 2).to(db).t() if b_transposed else (torch.randn(k, n) * 2).to(db)
    return a, b, torch.tensor(0.37), torch.tensor([1.9])


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("dtypes", [(E4, E4), (E5, E5), (E4, E5)], ids=str)
@pytest.mark.parametrize("shape", [(32, 64, 48), (37, 300, 70), (130, 257, 520)], ids=str)
@pytest.mark.parametrize("b_transposed", [True, False], ids=["b_col_major", "b_row_major"])
@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
def test_scaled_mm_matches_cpu_in_isa_mode(shape, dtypes, out_dtype, b_transposed, bias):
    a, b, sa, sb = _operands(*shape, *dtypes, b_transposed)
    bv = torch.randn(shape[2]).to(out_dtype if out_dtype != torch.float32 else torch.bfloat16)
    kw = {"bias": bv} if bias else {}
    expected = torch._scaled_mm(a, b, sa, sb, out_dtype=out_dtype, **kw)
    dev = [t.to("neuron") for t in (a, b, sa, sb)]
    kwd = {"bias": bv.to("neuron")} if bias else {}
    got = _isa(lambda: torch._scaled_mm(*dev, out_dtype=out_dtype, **kwd))
    assert not neuronsim.get_fallback_ops(), neuronsim.get_fallback_ops()
    assert "aten::_scaled_mm" in neuronsim.get_executed_ops()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    scale = max(expected.double().abs().max().item(), 1.0)
    err = (got.double() - expected.double()).abs().max().item()
    assert err <= TOL[out_dtype] * scale, f"max error {err} > {TOL[out_dtype]} x {scale}"


def test_scaled_mm_forms_the_kernel_does_not_take_run_on_the_cpu():
    a, b, _, _ = _operands(32, 64, 48, E4, E4, True)
    cases = [
        # row-wise scales
        (torch.rand(32, 1) + 0.5, torch.rand(1, 48) + 0.5, torch.bfloat16),
        # an FP8 output (the default out_dtype)
        (torch.tensor(0.5), torch.tensor(0.25), None),
    ]
    for sa, sb, od in cases:
        expected = torch._scaled_mm(a, b, sa, sb, out_dtype=od)
        neuronsim.clear_op_tracking()
        got = torch._scaled_mm(*(t.to("neuron") for t in (a, b, sa, sb)), out_dtype=od)
        assert "aten::_scaled_mm" in neuronsim.get_fallback_ops()
        assert torch.equal(got.cpu().view(torch.uint8), expected.view(torch.uint8))


@pytest.mark.parametrize(
    "case, error",
    [
        # PyTorch's rule for every backend (its Meta kernel's words); the host CPU's kernel is
        # not the reference: oneDNN on an AMX-FP16 CPU accepts a float64 scale.
        ("float64_scale", "For tensorwise scaling, both scale_a and scale_b must be float"),
        ("shapes", "shapes cannot be multiplied"),
    ],
)
def test_scaled_mm_rejects_bad_input(case, error):
    """Bad scales and mismatched shapes raise a fixed RuntimeError on neuron, whatever the
    runner's CPU kernels accept."""
    a, b, sa, sb = _operands(32, 64, 48, E4, E4, True)
    args = {"float64_scale": (a, b, sa.double(), sb), "shapes": (a, a, sa, sb)}[case]
    with pytest.raises(RuntimeError, match=error):
        torch._scaled_mm(*(t.to("neuron") for t in args), out_dtype=torch.bfloat16)
    if case == "float64_scale":  # the Meta kernel, PyTorch's reference, says the same
        with pytest.raises(RuntimeError, match=error):
            torch._scaled_mm(*(t.to("meta") for t in args), out_dtype=torch.bfloat16)


_TIMES = """
    import json, torch, neuronsim
    torch.manual_seed(0)
    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    # Both operands K-major (a stored transposed, b row-major): TensorE runs only the matmuls,
    # no operand transposes.
    a16 = a.t().contiguous().bfloat16().to("neuron").t()
    b16 = b.bfloat16().to("neuron")
    a8 = a.t().contiguous().to(torch.float8_e4m3fn).to("neuron").t()
    b8 = b.to(torch.float8_e4m3fn).to("neuron")
    s = torch.tensor(1.0).to("neuron")
    torch.neuron.synchronize()

    def tensor_busy():
        stats = neuronsim.device_stats()
        return sum(v["value"] for k, v in stats.items() if k.endswith(".tensor.busy_ps"))

    t0 = tensor_busy()
    torch.mm(a16, b16)
    torch.neuron.synchronize()
    t1 = tensor_busy()
    torch._scaled_mm(a8, b8, s, s, out_dtype=torch.bfloat16)
    torch.neuron.synchronize()
    t2 = tensor_busy()
    print(json.dumps({"bf16": t1 - t0, "fp8": t2 - t1,
                      "fallbacks": sorted(neuronsim.get_fallback_ops())}))
"""


def test_trn2_scaled_mm_takes_half_the_bf16_tensor_time():
    r = run_python(_TIMES, env={"NEURON_SIM_PRESET": "trn2"})
    assert r.returncode == 0, r.stderr[-3000:]
    t = json.loads(r.stdout.strip().splitlines()[-1])
    assert not t["fallbacks"], t
    assert t["bf16"] > 0
    assert 0.45 < t["fp8"] / t["bf16"] < 0.55, t
