"""NKI kernels (the project's own, tests/python/nki_kernels) compute their values on the
simulated engines: each against numpy, through the entry points users call (a plain @nki.jit
call on numpy arrays, nki.simulate_kernel, nki.simulate, a grid launch)."""

import ml_dtypes
import neuronxcc.nki as nki_legacy
import nki as nki_current
import numpy as np
import pytest
from nki_kernels import current_kernels as ck
from nki_kernels import legacy_kernels as lk

rng = np.random.default_rng(7)


def test_grid_add_float16():
    a = rng.random((256, 1024)).astype(np.float16)
    b = rng.random((256, 1024)).astype(np.float16)
    c = lk.add_grid_kernel[2, 2](a, b)
    assert c.dtype == np.float16 and c.shape == a.shape
    np.testing.assert_array_equal(c, (a.astype(np.float32) + b).astype(np.float16))


@pytest.mark.parametrize("rows", [128, 300])
def test_masked_tiles(rows):
    x = rng.standard_normal((rows, 96)).astype(np.float32)
    y = lk.scale_shift_kernel(x, 3.0, -1.5)
    np.testing.assert_allclose(y, x * 3.0 - 1.5, rtol=1e-6, atol=1e-6)


def _bf16(shape):
    return rng.standard_normal(shape).astype(ml_dtypes.bfloat16)


def _matmul_ref(lhsT, rhs):
    return lhsT.astype(np.float32).T @ rhs.astype(np.float32)


@pytest.mark.parametrize("kernel", [lk.matmul_tiled_kernel, lk.matmul_blocked_kernel])
def test_legacy_matmul(kernel):
    lhsT, rhs = _bf16((256, 256)), _bf16((256, 1024))
    out = kernel(lhsT, rhs)
    assert out.dtype == ml_dtypes.bfloat16
    ref = _matmul_ref(lhsT, rhs)
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=1e-2, atol=1e-1)


def test_current_matmul_first_write_overwrites():
    lhsT, rhs = _bf16((384, 128)), _bf16((384, 512))
    out = ck.matmul_kernel(lhsT, rhs)
    np.testing.assert_allclose(out.astype(np.float32), _matmul_ref(lhsT, rhs), rtol=1e-2, atol=1e-1)


def test_softmax_and_simulate_kernel():
    x = rng.standard_normal((64, 200)).astype(np.float32)
    y = nki_legacy.simulate_kernel(lk.softmax_kernel, x)
    np.testing.assert_allclose(y, lk.reference_softmax(x), rtol=1e-5, atol=1e-6)


def test_rmsnorm():
    x = rng.standard_normal((256, 64)).astype(np.float32)
    w = rng.standard_normal((64,)).astype(np.float32)
    y = lk.rmsnorm_kernel(x, w)
    np.testing.assert_allclose(y, lk.reference_rmsnorm(x, w), rtol=1e-5, atol=1e-5)


def test_transpose():
    x = rng.standard_normal((96, 40)).astype(np.float32)
    np.testing.assert_array_equal(lk.transpose_kernel(x), x.T)


def test_sequential_accumulation():
    x = rng.standard_normal((512, 64)).astype(np.float32)
    ref = x.reshape(4, 128, 64).sum(axis=0)
    np.testing.assert_allclose(lk.sequential_accumulate_kernel(x), ref, rtol=1e-5, atol=1e-5)


def test_current_generation_add_and_simulate():
    a = rng.random((256, 1024)).astype(np.float32)
    b = rng.random((256, 1024)).astype(np.float32)
    np.testing.assert_array_equal(nki_current.simulate(ck.add_kernel)(a, b), a + b)
    np.testing.assert_array_equal(ck.add_kernel(a, b), a + b)


def test_current_activation_and_tensor_scalar():
    x = rng.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_allclose(ck.exp_scale_kernel(x), np.exp(2 * x) + 1, rtol=1e-5)


def test_affine_range_body_is_traced_once():
    """Python side effects in an affine_range body happen once (the legacy tracer's rule)."""
    import neuronxcc.nki.language as nl

    calls = []

    @nki_legacy.jit
    def kernel(x):
        y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(x.shape[0] // 128):
            calls.append(1)
            nl.store(y[i * 128 : (i + 1) * 128, :], value=nl.load(x[i * 128 : (i + 1) * 128, :]))
        return y

    x = rng.standard_normal((512, 8)).astype(np.float32)
    np.testing.assert_array_equal(kernel(x), x)
    assert len(calls) == 1


def test_affine_select_causal_mask():
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl

    @nki_legacy.jit
    def causal(x):
        y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:64]
        t = nl.load(x)
        nl.store(y, value=nisa.affine_select(i_p - i_f >= 0, t, -1e4))
        return y

    x = rng.standard_normal((128, 64)).astype(np.float32)
    want = np.where(np.arange(128)[:, None] >= np.arange(64)[None, :], x, np.float32(-1e4))
    np.testing.assert_array_equal(causal(x), want)
