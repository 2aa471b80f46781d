"""64-bit data on the device: float64 and int64 tensors are stored at full width, native ops
compute them at 32 bits (as TorchNeuron documents for Trainium), and NEURON_SIM_EXACT_64BIT=1
computes them exactly."""

import json
from concurrent.futures import ThreadPoolExecutor

import neuronsim
import pytest
import torch
from conftest import run_python

# float64 values whose sums need more than float32's 24-bit mantissa.
A64 = torch.tensor([2.0**24 + 1, 1.0000001, 3.0, 1 / 3, 123456.789012345], dtype=torch.float64)
B64 = torch.tensor([1.0, 2.0**-30, 1e-9, 1 / 7, 0.000001], dtype=torch.float64)
# int64 values around and beyond the int32 range.
I64 = torch.tensor([2**31 - 1, -(2**31), 2**40 + 5, -5, 7], dtype=torch.int64)


def _as_f32(fn, *xs):
    """The CPU float32 computation of fn, cast back to float64."""
    return fn(*(x.float() for x in xs)).double()


def _as_i32(fn, *xs):
    """The CPU int32 computation of fn (wrapping), cast back to int64."""
    return fn(*(x.to(torch.int32) for x in xs)).to(torch.int64)


@pytest.fixture(scope="module", autouse=True)
def exact_run():  # autouse: the interpreter starts with the module's first test
    code = (
        f"""
        import json, torch, neuronsim
        a = torch.tensor({A64.tolist()}, dtype=torch.float64)
        b = torch.tensor({B64.tolist()}, dtype=torch.float64)
        i = torch.tensor({I64.tolist()}, dtype=torch.int64)
    """
        + """
        da, db, di = a.to("neuron"), b.to("neuron"), i.to("neuron")
        neuronsim.clear_op_tracking()
        out = {
            "add": torch.equal((da + db).cpu(), a + b),
            "mul": torch.equal((da * db).cpu(), a * b),
            "div": torch.equal((da / db).cpu(), a / b),
            "int_add": torch.equal((di + 1).cpu(), i + 1),
            "int_mul": torch.equal((di * 3).cpu(), i * 3),
            "in_place": torch.equal(da.clone().add_(db).cpu(), a + b),
            "sum": torch.equal(di.sum().cpu(), i.sum()),
            "at32": sum(c["computed_at_32_bits"] for c in neuronsim.op_report().values()),
        }
        print(json.dumps(out))
    """
    )
    pool = ThreadPoolExecutor(max_workers=1)
    fut = pool.submit(run_python, code, {"NEURON_SIM_EXACT_64BIT": "1"})
    yield fut
    pool.shutdown(wait=True)


def test_64bit_tensors_live_on_the_device():
    x = torch.ones(3, device="neuron")
    d = x.to(torch.float64)
    assert d.dtype == torch.float64 and d.device == x.device
    assert d.element_size() == 8
    assert d.untyped_storage().nbytes() == 3 * 8
    assert d.double() is d
    i = torch.arange(5, device="neuron")
    assert i.dtype == torch.int64 and i.is_neuron
    assert i.untyped_storage().nbytes() == 5 * 8
    z = torch.zeros(2, 2, dtype=torch.float64, device="neuron")
    assert z.dtype == torch.float64 and z.is_neuron
    # Storage keeps every bit: round trips and device copies are exact.
    assert torch.equal(A64.to("neuron").cpu(), A64)
    assert torch.equal(A64.to("neuron").clone().cpu(), A64)
    assert torch.equal(I64.to("neuron").cpu(), I64)


def test_float64_arithmetic_is_computed_at_32_bits():
    da, db = A64.to("neuron"), B64.to("neuron")
    for fn in (torch.add, torch.sub, torch.mul, torch.div):
        got = fn(da, db)
        assert got.dtype == torch.float64 and got.is_neuron
        assert not torch.equal(got.cpu(), fn(A64, B64))  # not the float64 result ...
        assert torch.equal(got.cpu(), _as_f32(fn, A64, B64))  # ... but float32's, widened


def test_float64_in_place_and_out_variants_at_32_bits():
    da, db = A64.to("neuron"), B64.to("neuron")
    expected = _as_f32(torch.add, A64, B64)
    x = da.clone()
    x.add_(db)
    assert torch.equal(x.cpu(), expected)
    out = torch.empty(5, dtype=torch.float64, device="neuron")
    torch.add(da, db, out=out)
    assert torch.equal(out.cpu(), expected)
    # A float32 operand promotes to float64, computed the same way.
    mixed = da + db.float()
    assert mixed.dtype == torch.float64
    assert torch.equal(mixed.cpu(), _as_f32(torch.add, A64, B64.float().double()))


def test_int64_arithmetic_wraps_at_32_bits():
    di = I64.to("neuron")
    add = (di + 1).cpu()
    assert add.dtype == torch.int64
    assert torch.equal(add, _as_i32(lambda x: x + 1, I64))
    assert add[0].item() == -(2**31)  # int32 max + 1 wraps
    assert add[2].item() == 6  # 2**40 + 5 keeps its low 32 bits
    assert torch.equal((di * 3).cpu(), _as_i32(lambda x: x * 3, I64))
    assert torch.equal((di - di).cpu(), torch.zeros(5, dtype=torch.int64))


def test_int64_indices_index_correctly():
    x = torch.arange(10.0, device="neuron")
    idx = torch.tensor([9, 0, 4], device="neuron")
    assert x[idx].cpu().tolist() == [9.0, 0.0, 4.0]
    assert torch.arange(6, device="neuron").sum().item() == 15


def test_op_report_counts_ops_computed_at_32_bits():
    da, db = A64.to("neuron"), B64.to("neuron")
    f32 = torch.ones(5, device="neuron")
    neuronsim.clear_op_tracking()
    da + db
    da + db
    f32 + f32
    I64.to("neuron") * 2
    report = neuronsim.op_report()
    assert report["aten::add.Tensor"] == {"native": 3, "fallback": 0, "computed_at_32_bits": 2}
    assert report["aten::mul.Tensor"]["computed_at_32_bits"] == 1
    assert "aten::add.Tensor" in neuronsim.get_executed_ops()
    assert neuronsim.get_fallback_ops() == set()


def test_exact_64bit_mode_matches_cpu(exact_run):
    r = exact_run.result()
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out == {
        "add": True,
        "mul": True,
        "div": True,
        "int_add": True,
        "int_mul": True,
        "in_place": True,
        "sum": True,
        "at32": 0,
    }
