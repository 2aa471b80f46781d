"""Neuron tensors: copies for every dtype, metadata-only views, non-contiguous and in-place ops,
printing, serialization, scalars, complex data through the CPU fallback, and op tracking."""

import io
import warnings
from concurrent.futures import ThreadPoolExecutor

import neuronsim
import pytest
import torch
from conftest import run_python

DEVICE_DTYPES = [
    torch.float32,
    torch.bfloat16,
    torch.float16,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.bool,
    torch.float64,
]

_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _sample(dtype, shape=(7, 5)):
    g = torch.Generator().manual_seed(1234)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        if dtype == torch.float64:
            # Values that need all 53 mantissa bits, huge and tiny magnitudes, and specials.
            t = torch.randn(shape, generator=g, dtype=torch.float64) * 1e6 + 1 / 3
            t.view(-1)[:4] = torch.tensor(
                [1e300, 5e-320, float("inf"), float("nan")], dtype=torch.float64
            )
            return t
        t = torch.randn(shape, generator=g) * 10
        t.view(-1)[:3] = torch.tensor([float("inf"), float("-inf"), float("nan")])
        return t.to(dtype)
    info = torch.iinfo(dtype)
    t = torch.randint(info.min, info.max, shape, generator=g, dtype=dtype)
    t.view(-1)[:2] = torch.tensor([info.min, info.max], dtype=dtype)
    return t


def _bits(t):
    """The raw bits, for an exact comparison (NaN payloads included)."""
    if t.dtype == torch.bool:
        return t.to(torch.uint8)
    return t.contiguous().view(_BITS[t.element_size()])


def _assert_identical(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert torch.equal(_bits(a.cpu()), _bits(b.cpu()))


# ---------------------------------------------------------------------------------------------
# Copies.


@pytest.mark.parametrize("dtype", DEVICE_DTYPES, ids=str)
def test_copy_round_trip_is_exact(dtype):
    cpu = _sample(dtype)
    dev = cpu.to("neuron")
    assert dev.device == torch.device("neuron", 0) and dev.dtype == dtype
    _assert_identical(dev.cpu(), cpu)
    # Device-to-device copies (same core, other core) and a copy_ into an existing tensor.
    _assert_identical(dev.clone(), cpu)
    _assert_identical(dev.to("neuron:1"), cpu)
    out = torch.empty_like(dev)
    out.copy_(dev)
    _assert_identical(out, cpu)
    back = torch.empty_like(cpu)
    back.copy_(dev)
    _assert_identical(back, cpu)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.int64, torch.float64], ids=str
)
def test_non_contiguous_copies(dtype):
    cpu = _sample(dtype, (6, 9))
    _assert_identical(cpu.t().to("neuron"), cpu.t())
    _assert_identical(cpu[:, ::2].to("neuron"), cpu[:, ::2])
    dev = cpu.to("neuron")
    _assert_identical(dev.t().cpu(), cpu.t())
    _assert_identical(dev[1::2, 3:].cpu(), cpu[1::2, 3:])
    _assert_identical(dev.t().contiguous(), cpu.t().contiguous())
    # A copy into a strided destination on the device.
    dst = torch.zeros(9, 6, dtype=dtype, device="neuron")
    dst.t().copy_(dev)
    _assert_identical(dst, cpu.t().contiguous())


def test_empty_and_zero_dim_tensors():
    e = torch.empty(0, 3, device="neuron")
    assert e.shape == (0, 3) and e.cpu().shape == (0, 3)
    s = torch.tensor(2.5).to("neuron")
    assert s.dim() == 0 and s.cpu().item() == 2.5


# ---------------------------------------------------------------------------------------------
# Views.

VIEWS = {
    "view": lambda t: t.view(4, 6),
    "transpose": lambda t: t.transpose(0, 1),
    "t": lambda t: t.t(),
    "slice": lambda t: t[1:3, 2:5],
    "step_slice": lambda t: t[:, ::2],
    "select": lambda t: t[1],
    "select_column": lambda t: t[:, 3],
    "as_strided": lambda t: t.as_strided((2, 2), (6, 1), 1),
    "unsqueeze": lambda t: t.unsqueeze(0),
    "permute": lambda t: t.permute(1, 0),
    "narrow": lambda t: t.narrow(1, 2, 3),
    "diagonal": lambda t: t.diagonal(),
    "reshape": lambda t: t.reshape(2, 12),
    "flatten": lambda t: t.flatten(),
    "unflatten": lambda t: t.unflatten(1, (2, 3)),
    "split": lambda t: t.split(2, dim=1)[1],
    "unbind": lambda t: t.unbind(0)[2],
    "detach": lambda t: t.detach(),
    "view_dtype": lambda t: t.view(torch.int32),
    "unfold": lambda t: t.unfold(1, 2, 2),
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_views_share_storage_and_writes_reach_the_base(name):
    fn = VIEWS[name]
    cpu = torch.arange(24.0).reshape(4, 6)
    dev = cpu.clone().to("neuron")
    neuronsim.clear_op_tracking()
    t0 = neuronsim.simulated_time_ns()
    v = fn(dev)
    # Metadata only: no device kernel, no copy, same storage, and (as on TorchNeuron) not an
    # executed op.
    assert neuronsim.simulated_time_ns() == t0
    assert neuronsim.op_report() == {}
    assert v.device == dev.device
    assert v.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr()
    ref = fn(cpu)
    assert v.shape == ref.shape and v.stride() == ref.stride()
    assert v.storage_offset() == ref.storage_offset()
    assert torch.equal(v.cpu(), ref)
    # A write through the view is visible in the base.
    v.fill_(-1)
    ref.fill_(-1)
    assert torch.equal(_bits(dev.cpu()), _bits(cpu))


def test_expand_shares_storage_and_sees_base_writes():
    dev = torch.arange(3.0, device="neuron").reshape(3, 1)
    e = dev.expand(3, 4)
    assert e.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr()
    assert e.stride() == (1, 0)
    dev[1, 0] = 10.0
    assert e.cpu().tolist()[1] == [10.0] * 4


def test_complex_views_alias_real_storage():
    x = torch.zeros(3, 2, device="neuron")
    z = torch.view_as_complex(x)
    assert z.data_ptr() == x.data_ptr(), "view_as_complex copied instead of viewing"
    c = torch.zeros(3, dtype=torch.complex64, device="neuron")
    r = torch.view_as_real(c)
    assert r.data_ptr() == c.data_ptr(), "view_as_real copied instead of viewing"
    r.fill_(5.0)
    assert c.cpu().tolist() == [5 + 5j] * 3
    c.real.fill_(1.0)
    c.imag.fill_(2.0)
    assert c.cpu().tolist() == [1 + 2j] * 3


# ---------------------------------------------------------------------------------------------
# Non-contiguous operands and in-place ops give the CPU's values.

OPS = {
    "add_transposed": lambda t: t.t() + 1,
    "mul_strided": lambda t: t[:, ::2] * t[:, 1::2],
    "exp_slice": lambda t: t[1:5, 2:7].exp(),
    "sum_transposed": lambda t: t.t().sum(0),
    "matmul_transposed": lambda t: t.t() @ t,
    "where_strided": lambda t: torch.where(t[:, ::2] > 0, t[:, ::2], t[:, 1::2]),
    "softmax_transposed": lambda t: torch.softmax(t.t(), dim=-1),
    "index": lambda t: t[torch.tensor([0, 2, 5], device=t.device)],
    "contiguous": lambda t: t.t().contiguous(),
}

INPLACE = {
    "add_": lambda t: t.add_(1.5),
    "mul_transposed": lambda t: t.t().mul_(3),
    "clamp_slice": lambda t: t[1:4, 2:6].clamp_(-0.5, 0.5),
    "fill_column": lambda t: t.t()[2].fill_(7),
    "copy_rows": lambda t: t[::2].copy_(t[1::2]),
    "relu_strided": lambda t: t[:, ::3].relu_(),
    "setitem_scalar": lambda t: t.__setitem__((slice(None), 1), 0.25),
    "setitem_mask": lambda t: t.__setitem__(t > 1, 0.0),
    "index_put": lambda t: t.index_put_(
        (torch.tensor([0, 3], device=t.device),), torch.tensor(9.0, device=t.device)
    ),
    "addcmul_": lambda t: t[:, :4].addcmul_(t[:, 4:], t[:, 4:], value=0.5),
    "iadd_view": lambda t: t[:, ::2].__iadd__(t[:, 1::2]),
}


def _base():
    return torch.randn(6, 8, generator=torch.Generator().manual_seed(7))


@pytest.mark.parametrize("name", list(OPS))
def test_non_contiguous_ops_match_cpu(name):
    cpu = _base()
    dev = cpu.to("neuron")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = OPS[name](dev)
    assert out.device == dev.device
    torch.testing.assert_close(out.cpu(), OPS[name](cpu))


@pytest.mark.parametrize("name", list(INPLACE))
def test_in_place_ops_match_cpu(name):
    cpu = _base()
    dev = cpu.to("neuron")
    ptr = dev.data_ptr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        INPLACE[name](dev)
    INPLACE[name](cpu)
    assert dev.data_ptr() == ptr
    torch.testing.assert_close(dev.cpu(), cpu)


def test_indexing_with_cpu_index_tensors():
    # As on CUDA, advanced indexing moves CPU index tensors (and masks) to the device.
    cpu = torch.arange(6.0)
    dev = cpu.to("neuron")
    idx = torch.tensor([4, 0, 2])
    assert dev[idx].cpu().tolist() == [4.0, 0.0, 2.0]
    mask = cpu > 2
    assert dev[mask].cpu().tolist() == [3.0, 4.0, 5.0]
    dev[torch.tensor([1])] = 9.0
    dev.index_put_((torch.tensor([5]),), torch.tensor(-1.0))
    assert dev.cpu().tolist() == [0.0, 9.0, 2.0, 3.0, 4.0, -1.0]


def test_cross_core_operands_are_rejected():
    a = torch.ones(3, device="neuron:0")
    b = torch.ones(3, device="neuron:1")
    with pytest.raises(RuntimeError, match="same device"):
        a + b
    with pytest.raises(RuntimeError, match="same device"):
        a + torch.ones(3)  # non-scalar CPU operand
    assert (a + torch.tensor(2.0)).cpu().tolist() == [3.0, 3.0, 3.0]  # CPU scalars are fine
    assert (a + b.to("neuron:0")).cpu().tolist() == [2.0, 2.0, 2.0]


# ---------------------------------------------------------------------------------------------
# Printing, serialization, scalars.

PRINTED = [
    torch.arange(6.0).reshape(2, 3) / 7,
    torch.arange(1200.0).reshape(30, 40),  # summarized
    torch.tensor([1, -2, 3], dtype=torch.int32),
    torch.tensor([True, False]),
    torch.tensor([1.5, 2.0], dtype=torch.bfloat16),
    torch.tensor([2**40 + 3, -5]),
    torch.tensor([16777217.0, 0.1], dtype=torch.float64),
    torch.tensor(3.5),
    torch.tensor([float("nan"), float("inf"), 1.0]),
]


@pytest.mark.parametrize("i", range(len(PRINTED)))
def test_printing(i):
    cpu = PRINTED[i]
    dev = cpu.to("neuron")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # formatting helpers may take the fallback
        text = repr(dev)
    assert "device='neuron:0'" in text
    assert text.replace(", device='neuron:0'", "").replace("\n       ", "\n") == repr(cpu).replace(
        "\n       ", "\n"
    )


def test_printing_on_another_core():
    assert "device='neuron:1'" in repr(torch.ones(2, device="neuron:1"))


def _roundtrip(obj, **kw):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **kw)


def test_save_load():
    x = torch.randn(3, 4).to("neuron:1")
    obj = {"x": x, "row": x[1], "i64": torch.tensor([2**40 + 1], device="neuron")}
    for map_location, expected in [
        (None, "neuron:1"),
        ("neuron", "neuron:0"),
        ("neuron:1", "neuron:1"),
        ("cpu", "cpu"),
        ({"neuron:1": "neuron:0"}, "neuron:0"),
    ]:
        loaded = _roundtrip(obj, map_location=map_location)
        assert str(loaded["x"].device) == expected
        assert torch.equal(loaded["x"].cpu(), x.cpu())
        # The view still shares the loaded storage.
        assert (
            loaded["row"].untyped_storage().data_ptr() == loaded["x"].untyped_storage().data_ptr()
        )
        assert loaded["i64"].cpu().item() == 2**40 + 1


def test_save_load_state_dict_and_cpu_checkpoint_to_neuron():
    model = torch.nn.Linear(4, 2).to("neuron")
    sd = _roundtrip(model.state_dict(), map_location="neuron", weights_only=True)
    assert sd["weight"].device == torch.device("neuron", 0)
    assert torch.equal(sd["weight"].cpu(), model.weight.detach().cpu())
    cpu_sd = _roundtrip({"w": torch.arange(4.0)}, map_location="neuron")
    assert cpu_sd["w"].is_neuron and cpu_sd["w"].cpu().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_deepcopy_and_pickle():
    import copy
    import pickle

    x = torch.arange(6.0).reshape(2, 3).to("neuron:1")
    for y in (copy.deepcopy(x), pickle.loads(pickle.dumps(x))):
        assert y.device == x.device
        assert y.data_ptr() != x.data_ptr()
        assert torch.equal(y.cpu(), x.cpu())
    m = copy.deepcopy(torch.nn.Linear(3, 2).to("neuron"))
    assert m.weight.is_neuron


def test_item_and_tolist():
    assert torch.tensor(2.5, device="neuron").item() == 2.5
    assert torch.tensor([2**40 + 3], device="neuron").item() == 2**40 + 3
    assert torch.tensor(True, device="neuron").item() is True
    assert torch.tensor([7], dtype=torch.int8, device="neuron").item() == 7
    assert float(torch.tensor([1.25], device="neuron")) == 1.25
    assert int(torch.tensor(9, device="neuron")) == 9
    cpu = torch.arange(12).reshape(3, 4)
    dev = cpu.to("neuron")
    assert dev.tolist() == cpu.tolist()
    assert dev.t().tolist() == cpu.t().tolist()
    assert dev[1, 2].item() == 6
    with pytest.raises(RuntimeError):
        dev.item()


# ---------------------------------------------------------------------------------------------
# Complex data: the CPU fallback.


def _complex():
    return torch.randn(5, dtype=torch.complex64, generator=torch.Generator().manual_seed(3))


def test_complex_ops_use_the_counted_cpu_fallback():
    cpu = _complex()
    dev = cpu.to("neuron")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prod = dev * dev
        total = dev.sum()
    assert prod.device == dev.device and prod.dtype == torch.complex64
    assert torch.equal(prod.cpu(), cpu * cpu)
    torch.testing.assert_close(total.cpu(), cpu.sum())
    assert {"aten::mul.Tensor", "aten::sum"} <= neuronsim.get_fallback_ops()
    assert "aten::mul.Tensor" not in neuronsim.get_executed_ops()
    report = neuronsim.op_report()
    assert report["aten::mul.Tensor"] == {"native": 0, "fallback": 1, "computed_at_32_bits": 0}


def test_fallback_warns_once_per_op():
    dev = _complex().to("neuron")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(3):
            torch.sinh(dev)
            torch.cosh(dev)
    msgs = [str(x.message) for x in w if "neuronsim" in str(x.message)]
    assert len([m for m in msgs if "aten::sinh" in m]) == 1
    assert len([m for m in msgs if "aten::cosh" in m]) == 1
    sinh = next(m for m in msgs if "aten::sinh" in m)
    assert "complex" in sinh and "NEURON_SIM_STRICT" in sinh
    assert all(issubclass(x.category, UserWarning) for x in w)
    assert neuronsim.op_report()["aten::sinh"]["fallback"] == 3


def test_complex_device_to_device_copies():
    cpu = _complex()
    dev = cpu.to("neuron")
    assert torch.equal(dev.clone().cpu(), cpu)
    out = torch.empty_like(dev)
    out.copy_(dev)
    assert torch.equal(out.cpu(), cpu)
    assert torch.equal(dev.to("neuron:1").cpu(), cpu)
    m = cpu.reshape(1, 5).expand(2, 5).t().to("neuron")
    assert torch.equal(m.t().contiguous().cpu(), cpu.reshape(1, 5).expand(2, 5))


# ---------------------------------------------------------------------------------------------
# Fresh interpreters: strict mode, and conjugate views (a crash would take pytest down).

_STRICT = """
    import torch, neuronsim
    x = torch.randn(4, device="neuron")
    print("native", ((x + 1) * 2).cpu().shape)
    c = torch.randn(3, dtype=torch.complex64).to("neuron")
    try:
        c * c
        print("fallback ran")
    except RuntimeError as e:
        print("error", str(e).splitlines()[0])
    print("after", (x - x).abs().sum().item())
"""

_CONJ = """
    import warnings, torch, neuronsim
    warnings.simplefilter("ignore")
    cpu = torch.randn(4, dtype=torch.complex64)
    dev = cpu.to("neuron")
    print("conj_cpu", torch.equal(dev.conj().cpu(), cpu.conj()))
    print("resolve", torch.equal(dev.conj().resolve_conj().cpu(), cpu.conj()))
    print("conj_mul", torch.allclose((dev.conj() * dev).cpu(), cpu.conj() * cpu))
"""


@pytest.fixture(scope="module", autouse=True)
def runs():  # autouse: the interpreters start with the module's first test
    pool = ThreadPoolExecutor(max_workers=2)
    futures = {
        "strict": pool.submit(run_python, _STRICT, {"NEURON_SIM_STRICT": "1"}),
        "conj": pool.submit(run_python, _CONJ, {}),
    }
    yield futures
    pool.shutdown(wait=True)


def _lines(r):
    return {
        line.split(" ", 1)[0]: line.split(" ", 1)[1]
        for line in r.stdout.splitlines()
        if " " in line
    }


def test_strict_mode_turns_fallback_into_an_error(runs):
    r = runs["strict"].result()
    assert r.returncode == 0, r.stderr
    out = _lines(r)
    assert out["native"] == "torch.Size([4])"
    assert "error" in out, r.stdout
    assert "aten::mul" in out["error"]
    assert "NEURON_SIM_STRICT" in out["error"]
    assert out["after"] == "0.0"


def test_conjugated_complex_tensors(runs):
    r = runs["conj"].result()
    assert r.returncode == 0, f"exit code {r.returncode}\n{r.stdout}\n{r.stderr[-2000:]}"
    out = _lines(r)
    assert out == {"conj_cpu": "True", "resolve": "True", "conj_mul": "True"}


# ---------------------------------------------------------------------------------------------
# Op tracking.


def test_op_tracking_semantics():
    a = torch.randn(4, device="neuron")
    b = torch.randn(4, device="neuron")
    out = torch.empty(4, device="neuron")
    neuronsim.clear_op_tracking()
    assert neuronsim.get_executed_ops() == set()
    assert neuronsim.get_fallback_ops() == set()
    assert neuronsim.op_report() == {}
    a + b
    a + b
    a.add_(b)
    torch.mul(a, b, out=out)
    # Full names with overload; the ops a kernel runs internally are not the program's.
    assert neuronsim.get_executed_ops() == {
        "aten::add.Tensor",
        "aten::add_.Tensor",
        "aten::mul.out",
    }
    report = neuronsim.op_report()
    assert report["aten::add.Tensor"] == {
        "native": 2,
        "fallback": 0,
        "computed_at_32_bits": 0,
    }
    assert report["aten::add_.Tensor"]["native"] == 1
    # Views only change metadata: not executed ops, as on TorchNeuron.
    neuronsim.clear_op_tracking()
    a.view(2, 2).t()
    assert neuronsim.get_executed_ops() == set()
    # Ops on CPU tensors are not.
    neuronsim.clear_op_tracking()
    torch.ones(3) + 1
    assert neuronsim.op_report() == {}
    neuronsim.clear_op_tracking()
    assert neuronsim.op_report() == {}


def test_fallback_tracking_does_not_count_internal_copies():
    x = torch.tensor([3, 1, 3, 2], device="neuron")
    neuronsim.clear_op_tracking()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        u, _ = torch.unique(x, return_counts=True)  # with counts: the CPU fallback
    executed, fallbacks, report = (
        neuronsim.get_executed_ops(),
        neuronsim.get_fallback_ops(),
        neuronsim.op_report(),
    )
    assert u.device == x.device and u.cpu().tolist() == [1, 2, 3]
    assert executed == set()
    (op,) = fallbacks
    assert op.startswith("aten::") and "unique" in op
    assert report[op] == {"native": 0, "fallback": 1, "computed_at_32_bits": 0}


def test_reductions_of_a_permuted_dense_tensor_run_native():
    # A batch_first RNN output or a transposed activation: every reduced dim is dense in memory,
    # only not in logical order. Value reductions run native; argmax (logical positions) may not.
    x = torch.randn(4, 3, 8).permute(1, 0, 2)
    d = x.to("neuron")
    assert d.stride() == x.stride()
    neuronsim.clear_op_tracking()
    for f in (
        lambda t: t.sum(),
        lambda t: t.mean(),
        lambda t: t.var(),
        lambda t: t.amax(),
        lambda t: t.sum((0, 2)),
        lambda t: t.transpose(0, 2).sum(),
    ):
        torch.testing.assert_close(f(d).cpu(), f(x))
    assert neuronsim.get_fallback_ops() == set()
