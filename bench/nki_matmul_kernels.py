"""The matmul tutorial's optimisation story as the project's own legacy NKI kernels (written
here in the tutorials' style; the public tutorial file can be given to nki_matmul_bench.py
instead): result[M, N] = lhsT[K, M].T @ rhs[K, N] in bf16.

1. tiled: every (m, n) output tile reloads its K column of both inputs;
2. hoisted: an m row of lhsT tiles is loaded once per m, an n column of rhs once per (m, n);
3. blocked free dims: 2 x 2 output tiles share their loads;
4. fully blocked: M, N and K blocked, results accumulated in SBUF over K blocks.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def matmul_tiled(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 512):
            acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                a = nl.load(lhsT[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128])
                b = nl.load(rhs[k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512])
                acc += nl.matmul(a, b, transpose_x=True)
            nl.store(
                out[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512],
                value=nl.copy(acc, dtype=out.dtype),
            )
    return out


@nki.jit
def matmul_hoisted(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    il = nl.mgrid[0:128, 0:128]
    ir = nl.mgrid[0:128, 0:512]
    for m in nl.affine_range(M // 128):
        a = nl.ndarray((K // 128, nl.par_dim(128), 128), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // 128):
            a[k, il.p, il.x] = nl.load(lhsT[k * 128 + il.p, m * 128 + il.x])
        for n in nl.affine_range(N // 512):
            b = nl.ndarray((K // 128, nl.par_dim(128), 512), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(K // 128):
                b[k, ir.p, ir.x] = nl.load(rhs[k * 128 + ir.p, n * 512 + ir.x])
            acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                acc += nisa.nc_matmul(a[k, il.p, il.x], b[k, ir.p, ir.x])
            nl.store(out[m * 128 + ir.p, n * 512 + ir.x], value=nl.copy(acc, dtype=out.dtype))
    return out


@nki.jit
def matmul_blocked_free(lhsT, rhs, BM=2, BN=2):
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    il = nl.mgrid[0:128, 0:128]
    ir = nl.mgrid[0:128, 0:512]
    for m in nl.affine_range(M // (128 * BM)):
        a = nl.ndarray((BM, K // 128, nl.par_dim(128), 128), dtype=lhsT.dtype, buffer=nl.sbuf)
        for bm in nl.affine_range(BM):
            for k in nl.affine_range(K // 128):
                a[bm, k, il.p, il.x] = nl.load(lhsT[k * 128 + il.p, (m * BM + bm) * 128 + il.x])
        for n in nl.affine_range(N // (512 * BN)):
            b = nl.ndarray((BN, K // 128, nl.par_dim(128), 512), dtype=rhs.dtype, buffer=nl.sbuf)
            for bn in nl.affine_range(BN):
                for k in nl.affine_range(K // 128):
                    b[bn, k, ir.p, ir.x] = nl.load(rhs[k * 128 + ir.p, (n * BN + bn) * 512 + ir.x])
            for bm in nl.affine_range(BM):
                for bn in nl.affine_range(BN):
                    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(K // 128):
                        acc += nisa.nc_matmul(a[bm, k, il.p, il.x], b[bn, k, ir.p, ir.x])
                    nl.store(
                        out[(m * BM + bm) * 128 + ir.p, (n * BN + bn) * 512 + ir.x],
                        value=nl.copy(acc, dtype=out.dtype),
                    )
    return out


@nki.jit
def matmul_fully_blocked(lhsT, rhs, BM=16, BN=2, BK=8):
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    NM, NN, NK = M // (128 * BM), N // (512 * BN), K // (128 * BK)
    for n in nl.affine_range(NN):
        res = nl.zeros((NM, BM, BN, nl.par_dim(128), 512), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.sequential_range(NK):
            ir = nl.mgrid[0:128, 0 : 512 * BN]
            b = nl.ndarray((BK, nl.par_dim(128), 512 * BN), dtype=rhs.dtype, buffer=nl.sbuf)
            for bk in nl.affine_range(BK):
                b[bk, ir.p, ir.x] = nl.load(rhs[(BK * k + bk) * 128 + ir.p, 512 * BN * n + ir.x])
            for m in nl.affine_range(NM):
                il = nl.mgrid[0:128, 0 : 128 * BM]
                a = nl.ndarray((BK, nl.par_dim(128), 128 * BM), dtype=lhsT.dtype, buffer=nl.sbuf)
                for bk in nl.affine_range(BK):
                    a[bk, il.p, il.x] = nl.load(
                        lhsT[(BK * k + bk) * 128 + il.p, 128 * BM * m + il.x]
                    )
                i_a = nl.mgrid[0:128, 0:128]
                i_b = nl.mgrid[0:128, 0:512]
                for bn in nl.affine_range(BN):
                    for bm in nl.affine_range(BM):
                        acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
                        for bk in nl.affine_range(BK):
                            acc[...] += nisa.nc_matmul(
                                a[bk, i_a.p, bm * 128 + i_a.x], b[bk, i_b.p, bn * 512 + i_b.x]
                            )
                        res[m, bm, bn, i_b.p, i_b.x] += acc[i_b.p, i_b.x]
        for m in nl.affine_range(NM):
            for bm in nl.affine_range(BM):
                io = nl.mgrid[0:128, 0:512]
                packed = nl.ndarray((128, 512 * BN), dtype=res.dtype, buffer=nl.sbuf)
                for bn in nl.affine_range(BN):
                    packed[io.p, bn * 512 + io.x] = nl.copy(res[m, bm, bn, io.p, io.x])
                ip = nl.mgrid[0:128, 0 : 512 * BN]
                nl.store(
                    out[(BM * m + bm) * 128 + ip.p, 512 * BN * n + ip.x], value=packed[ip.p, ip.x]
                )
    return out


STEPS = ("matmul_tiled", "matmul_hoisted", "matmul_blocked_free", "matmul_fully_blocked")
