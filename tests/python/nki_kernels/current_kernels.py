"""The project's own kernels in the current (nki package) style: destination-first ISA calls,
Python loops, tiles in lists."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def add_kernel(a_input, b_input):
    M, N = a_input.shape
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 512):
            a_tile = nl.ndarray((128, 512), dtype=a_input.dtype, buffer=nl.sbuf)
            b_tile = nl.ndarray((128, 512), dtype=b_input.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_tile, src=a_input[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512])
            nisa.dma_copy(dst=b_tile, src=b_input[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512])
            c_tile = nl.ndarray((128, 512), dtype=a_input.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=c_tile, data1=a_tile, data2=b_tile, op=nl.add)
            nisa.dma_copy(
                dst=c_output[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512], src=c_tile
            )
    return c_output


@nki.jit
def matmul_kernel(lhsT, rhs):
    """First nc_matmul into a PSUM tile overwrites, later ones accumulate (NKI 0.3)."""
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        lhs_tiles = []
        for k in nl.affine_range(K // 128):
            t = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=lhsT[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128])
            lhs_tiles.append(t)
        for n in nl.affine_range(N // 512):
            psum = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                r = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=r, src=rhs[k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512])
                nisa.nc_matmul(dst=psum, stationary=lhs_tiles[k], moving=r)
            out = nl.ndarray((128, 512), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out, src=psum)
            nisa.dma_copy(dst=result[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512], src=out)
    return result


@nki.jit
def exp_scale_kernel(x):
    """y = exp(2 x) + 1 with activation and tensor_scalar writing into given tiles."""
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    e = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=e, op=nl.exp, data=t, scale=2.0)
    o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=o, data=e, op0=nl.add, operand0=1.0)
    nisa.dma_copy(dst=y, src=o)
    return y
