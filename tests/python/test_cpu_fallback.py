"""The CPU fallback writes back exactly what the op writes: schema-annotated arguments
(Tensor(a!), out=, tensor lists, in-place ops on views) and the writes the schema leaves out
(native_batch_norm's running statistics); a CPU kernel that raises leaves every argument
unchanged; a dtype the CPU kernel lacks is computed wider and cast back."""

import warnings

import neuronsim
import pytest
import torch


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _both(fn, *inputs):
    """fn on CPU copies and on neuron copies of inputs; returns (cpu inputs, neuron inputs
    moved back), after fn ran."""
    cpu = [t.clone() for t in inputs]
    dev = [t.to("neuron") for t in inputs]
    fn(*cpu)
    fn(*dev)
    return cpu, [t.cpu() for t in dev]


def test_batch_norm_training_updates_running_stats():
    # native_batch_norm is native now; the fallback's write-back of its running stats (which its
    # schema does not mark as written) is checked below through the forced fallback.
    torch.manual_seed(0)
    x = torch.randn(4, 3, 5, 5)
    m = torch.nn.BatchNorm2d(3)
    md = torch.nn.BatchNorm2d(3).to("neuron")
    for _ in range(3):
        y = m(x)
        yd = md(x.to("neuron"))
    torch.testing.assert_close(yd.cpu(), y)
    torch.testing.assert_close(md.running_mean.cpu(), m.running_mean)
    torch.testing.assert_close(md.running_var.cpu(), m.running_var)
    assert md.num_batches_tracked.item() == 3
    assert not torch.equal(m.running_mean, torch.zeros(3))


def test_out_argument_is_resized_and_written():
    x = torch.randn(5, 7)
    vals, idx = torch.empty(0), torch.empty(0, dtype=torch.long)
    dvals, didx = torch.empty(0, device="neuron"), torch.empty(0, dtype=torch.long, device="neuron")
    r = torch.kthvalue(x.to("neuron"), 3, 1, out=(dvals, didx))
    torch.kthvalue(x, 3, 1, out=(vals, idx))
    assert "aten::kthvalue.values" in neuronsim.get_fallback_ops()
    assert r[0] is dvals and r[1] is didx
    assert torch.equal(dvals.cpu(), vals) and torch.equal(didx.cpu(), idx)


def test_inplace_on_a_view_writes_through_to_the_base():
    base = torch.rand(6, 8) + 0.5
    cpu, (dev,) = _both(lambda b: b[1:, ::2].lgamma_(), base)
    assert "aten::lgamma_" in neuronsim.get_fallback_ops()
    torch.testing.assert_close(dev, cpu[0])


def test_out_aliasing_an_input():
    x = torch.rand(10) + 0.5
    cpu, (dev,) = _both(lambda t: torch.digamma(t[:5], out=t[5:]), x)
    torch.testing.assert_close(dev, cpu[0])


def test_unannotated_arguments_are_not_written():
    x = torch.rand(3, 4) + 0.5
    d = x.to("neuron")
    torch.lgamma(d)
    assert torch.equal(d.cpu(), x)


def test_index_reduce_inplace_with_tensor_arguments():
    x = torch.rand(5, 3)
    idx = torch.tensor([0, 2, 2, 4])
    src = torch.rand(4, 3)
    cpu, dev = _both(lambda a, i, s: a.index_reduce_(0, i, s, "prod"), x, idx, src)
    torch.testing.assert_close(dev[0], cpu[0])
    assert torch.equal(dev[2], src)  # src is read only


def test_a_raising_cpu_kernel_leaves_every_argument_unchanged():
    x = torch.rand(5, 3)
    d = x.to("neuron")
    idx = torch.tensor([0, 1, 9], device="neuron")  # the CPU kernel writes rows 0-1, then raises
    with pytest.raises((IndexError, RuntimeError)):
        d.index_reduce_(0, idx, torch.rand(3, 3, device="neuron"), "prod")
    assert torch.equal(d.cpu(), x)
    out = torch.full((4,), 7.0, device="neuron")
    with pytest.raises(RuntimeError):
        torch.kthvalue(
            torch.rand(3, device="neuron"),
            9,
            out=(out, torch.empty(0, dtype=torch.long, device="neuron")),
        )
    assert torch.equal(out.cpu(), torch.full((4,), 7.0))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int16, torch.uint8])
def test_integer_histc_is_computed_wider(dtype):
    # The CPU kernel lacks integer histc: the values come from a float64 host computation.
    x = torch.tensor([0, 1, 1, 2, 5, 7, 9, 9, 9], dtype=dtype)
    h = torch.histc(x.to("neuron"), bins=5, min=0, max=10)
    assert h.dtype == dtype
    expected = torch.histc(x.double(), bins=5, min=0, max=10).to(dtype)
    assert torch.equal(h.cpu(), expected)


# histc and bincount are native (kernels/histogram.cpp); ISA mode computes them on the device.
@pytest.mark.parametrize("isa", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.uint8])
def test_native_histc(isa, dtype):
    x = (torch.rand(1000) * 10).to(dtype)
    neuronsim._C._set_isa_mode(isa)
    try:
        for bins, lo, hi in ((5, 0, 10), (7, 2, 8), (4, 0, 0), (300, 0, 10)):
            h = torch.histc(x.to("neuron"), bins, lo, hi).cpu()
            ref = x if dtype.is_floating_point else x.double()
            expected = torch.histc(ref, bins, lo, hi).to(dtype)
            if isa and dtype == torch.bfloat16:  # the device counts in fp32, then rounds once
                expected = torch.histc(x.float(), bins, lo, hi).to(dtype)
            if isa and dtype == torch.uint8:  # counts above 255 saturate on the device (the
                # program converts its fp32 counts once); the host's conversion wraps them
                expected = torch.histc(ref, bins, lo, hi).clamp(max=255).to(dtype)
            assert torch.equal(h, expected), (bins, lo, hi)
    finally:
        neuronsim._C._set_isa_mode(False)
    assert "aten::histc" in neuronsim.get_executed_ops()
    assert not neuronsim.get_fallback_ops()


@pytest.mark.parametrize("isa", [False, True])
def test_native_bincount(isa):
    i = torch.randint(0, 20, (300,))
    w = torch.rand(300)
    neuronsim._C._set_isa_mode(isa)
    try:
        assert torch.equal(torch.bincount(i.to("neuron")).cpu(), torch.bincount(i))
        got = torch.bincount(i.to("neuron").int(), w.to("neuron"), minlength=30).cpu()
        torch.testing.assert_close(got, torch.bincount(i.int(), w, minlength=30))
    finally:
        neuronsim._C._set_isa_mode(False)
    assert "aten::bincount" in neuronsim.get_executed_ops()
    assert not neuronsim.get_fallback_ops()


@pytest.mark.parametrize(
    "lo,hi,match",
    [
        (3, 1, "max must be larger than min"),
        (0, float("inf"), "not finite"),
        (float("nan"), 1, "not finite"),
    ],
)
def test_histc_bad_range_raises_as_on_cpu(lo, hi, match):
    with pytest.raises(RuntimeError, match=match):
        torch.histc(torch.rand(10), 5, lo, hi)
    with pytest.raises(RuntimeError, match=match):
        torch.histc(torch.rand(10, device="neuron"), 5, lo, hi)


def test_forced_fallback_writes_back_unmarked_running_stats():
    torch.manual_seed(0)
    x, w, b = torch.randn(4, 3, 5, 5), torch.randn(3), torch.randn(3)
    rm, rv = torch.zeros(3), torch.ones(3)
    drm, drv = rm.to("neuron"), rv.to("neuron")
    ref = torch.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
    got = neuronsim._C._cpu_fallback_call(
        "aten::native_batch_norm", "", x.to("neuron"), w.to("neuron"), b.to("neuron"),
        drm, drv, True, 0.1, 1e-5,
    )  # fmt: skip
    torch.testing.assert_close(got[0].cpu(), ref[0])
    torch.testing.assert_close(drm.cpu(), rm)
    torch.testing.assert_close(drv.cpu(), rv)
    assert not torch.equal(rm, torch.zeros(3))


def test_an_op_without_a_cpu_kernel_is_a_clear_not_implemented_error():
    """PyTorch implements some ops only for accelerators (cuDNN's dropout state, and before it had
    a kernel here nn.SyncBatchNorm's batch_norm_stats): with no device kernel the fallback has
    nothing to run, and the error names the op and the reason, not the dispatcher's "Could not run
    ... with arguments from the 'CPU' backend" about tensors the user put on neuron."""
    neuronsim.clear_op_tracking()
    with pytest.raises(NotImplementedError) as e:
        torch.ops.aten._cudnn_init_dropout_state(0.5, True, 0, dtype=torch.uint8, device="neuron")
    msg = str(e.value)
    assert "aten::_cudnn_init_dropout_state is not implemented for the neuron device" in msg
    assert "no CPU kernel" in msg and "'CPU' backend" not in msg
    assert not neuronsim.get_fallback_ops()  # nothing ran on the CPU
    assert torch.ones(2, device="neuron").add(1).cpu().tolist() == [2.0, 2.0]  # still usable
