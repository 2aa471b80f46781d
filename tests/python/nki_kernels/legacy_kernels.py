"""The project's own NKI kernels in the legacy (neuronxcc.nki) tutorials' style: what the NKI
tests run (no public sample is copied here)."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np


@nki.jit
def add_grid_kernel(a_input, b_input):
    """c = a + b, one [128, 512] tile per SPMD instance (kernel[rows // 128, cols // 512])."""
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    ix = nl.program_id(0) * 128 + nl.arange(128)[:, None]
    iy = nl.program_id(1) * 512 + nl.arange(512)[None, :]
    a_tile = nl.load(a_input[ix, iy])
    b_tile = nl.load(b_input[ix, iy])
    nl.store(c_output[ix, iy], value=a_tile + b_tile)
    return c_output


@nki.jit
def scale_shift_kernel(x, scale, shift):
    """y = x * scale + shift, rows tiled by affine_range, a masked last tile (any row count)."""
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows, cols = x.shape
    i_f = nl.arange(cols)[None, :]
    for t in nl.affine_range((rows + 127) // 128):
        i_p = t * 128 + nl.arange(128)[:, None]
        tile = nl.load(x[i_p, i_f], mask=(i_p < rows))
        out = nl.add(nl.multiply(tile, scale), shift)
        nl.store(y[i_p, i_f], value=out, mask=(i_p < rows))
    return y


@nki.jit
def matmul_tiled_kernel(lhsT, rhs):
    """result = lhsT.T @ rhs: the K loop accumulates into one PSUM tile."""
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 512):
            acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                a[...] = nl.load(lhsT[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128])
                b[...] = nl.load(rhs[k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512])
                acc += nl.matmul(a[...], b[...], transpose_x=True)
            nl.store(
                result[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512],
                value=nl.copy(acc, dtype=result.dtype),
            )
    return result


@nki.jit
def matmul_blocked_kernel(lhsT, rhs):
    """The hoisted form: a column of lhsT tiles in one SBUF tensor with a block axis before the
    partition axis (nl.par_dim), nisa.nc_matmul accumulating into PSUM with +=."""
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    i_l = nl.mgrid[0:128, 0:128]
    i_r = nl.mgrid[0:128, 0:512]
    i_o = nl.mgrid[0:128, 0:512]
    for m in nl.affine_range(M // 128):
        lhs_tiles = nl.ndarray((K // 128, nl.par_dim(128), 128), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // 128):
            lhs_tiles[k, i_l.p, i_l.x] = nl.load(lhsT[k * 128 + i_l.p, m * 128 + i_l.x])
        for n in nl.affine_range(N // 512):
            rhs_tiles = nl.ndarray(
                (K // 128, nl.par_dim(128), 512), dtype=rhs.dtype, buffer=nl.sbuf
            )
            for k in nl.affine_range(K // 128):
                rhs_tiles[k, i_r.p, i_r.x] = nl.load(rhs[k * 128 + i_r.p, n * 512 + i_r.x])
            res = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                res[...] += nisa.nc_matmul(lhs_tiles[k, i_l.p, i_l.x], rhs_tiles[k, i_r.p, i_r.x])
            nl.store(
                result[m * 128 + i_o.p, n * 512 + i_o.x], value=nl.copy(res, dtype=result.dtype)
            )
    return result


@nki.jit
def softmax_kernel(x):
    """Row softmax of a [rows <= 128, cols] tensor: max, exp with the max as bias, sum, scale."""
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    m = nl.max(t, axis=1, keepdims=True)
    neg = nl.multiply(m, -1.0)
    e = nisa.activation(op=nl.exp, data=t, bias=neg, scale=1.0)
    s = nl.sum(e, axis=1, keepdims=True)
    r = nl.reciprocal(s)
    nl.store(y, value=nl.multiply(e, r))
    return y


@nki.jit
def rmsnorm_kernel(x, w):
    """y = x / sqrt(mean(x^2) + eps) * w, rows tiled by 128 (rows a multiple of 128)."""
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows, d = x.shape
    i_f = nl.arange(d)[None, :]
    w_tile = nl.load(w.reshape((1, d))[nl.arange(1)[:, None], i_f])
    for t in nl.affine_range(rows // 128):
        i_p = t * 128 + nl.arange(128)[:, None]
        xt = nl.load(x[i_p, i_f])
        sq = nl.square(xt, dtype=nl.float32)
        ms = nl.mean(sq, axis=1, keepdims=True)
        inv = nl.rsqrt(nl.add(ms, 1e-6))
        out = nl.multiply(nl.multiply(xt, inv), w_tile.broadcast_to((128, d)))
        nl.store(y[i_p, i_f], value=out)
    return y


@nki.jit
def transpose_kernel(x):
    """y = x.T for a [P <= 128, F <= 128] tensor through TensorE."""
    P, F = x.shape
    y = nl.ndarray((F, P), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    tt = nisa.nc_transpose(t)
    nl.store(y, value=nl.copy(tt, dtype=x.dtype))
    return y


@nki.jit
def sequential_accumulate_kernel(x):
    """Column sums of [n * 128, F] into one SBUF accumulator across a sequential_range."""
    rows, F = x.shape
    out = nl.ndarray((128, F), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, F), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.sequential_range(rows // 128):
        acc[...] = nl.add(acc, nl.load(x[i * 128 : (i + 1) * 128, :]))
    nl.store(out, value=acc)
    return out


def reference_softmax(x):
    x = x.astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def reference_rmsnorm(x, w):
    x = x.astype(np.float32)
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-6) * w.astype(np.float32)
