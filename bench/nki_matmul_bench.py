"""The NKI matmul tutorial's kernels at its published shape (bf16 lhsT [8192, 4096], rhs
[8192, 8192], trn1), timed timing-only on placeholders through ``nki.benchmark``: for each kernel
the simulated latency and HFU, the host time split into trace+lower and simulation, and, in the
same run, the kernel library's GEMM of the same shape timing-only (its simulated time and host
time, and the ratios).

    .venv/bin/python bench/nki_matmul_bench.py                       # the project's own kernels
    .venv/bin/python bench/nki_matmul_bench.py --kernels PATH/matrix_multiplication_nki_kernels.py \
        --names nki_matmul_tiled_,nki_matmul_hoist_load_,nki_matmul_block_free_dimension_,\
nki_matmul_fully_optimized_

Goals (issue 25): each kernel timed in under 30 s of host time, the fully optimised one under
10 s; trace+lower not dominating the simulation.
"""

import argparse
import importlib.util
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def load_module(path):
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location("nki_matmul_kernels_under_test", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernels", default=os.path.join(HERE, "nki_matmul_kernels.py"))
    p.add_argument("--names", help="comma-separated kernel names (default: the file's STEPS)")
    p.add_argument("--m", type=int, default=4096)
    p.add_argument("--k", type=int, default=8192)
    p.add_argument("--n", type=int, default=8192)
    args = p.parse_args()

    import neuronsim
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl
    import neuronxcc.nki.typing as nt

    mod = load_module(args.kernels)
    names = args.names.split(",") if args.names else list(mod.STEPS)
    lhsT = nt.tensor[[args.k, args.m], nl.bfloat16]
    rhs = nt.tensor[[args.k, args.n], nl.bfloat16]

    # The library GEMM of the same shape, timing-only, same process.
    c = neuronsim._C
    dev = c._current_device()
    bufs = [
        c._nki_hbm_alloc(n * 2, dev) for n in (args.k * args.m, args.k * args.n, args.m * args.n)
    ]
    t0 = time.perf_counter()
    lib = dict(
        c._nki_library_gemm(args.m, args.k, args.n, bufs[0][1], bufs[1][1], bufs[2][1], "bf16", dev)
    )
    lib_host = time.perf_counter() - t0
    for ptr, _ in bufs:
        c._nki_hbm_free(ptr)
    lib_us = (lib["end_ns"] - lib["start_ns"]) / 1e3
    peak = c._nki_core_params()["tensor_peak_flops"]
    lib_hfu = lib["tensor_flops"] / (peak * lib_us * 1e-6)

    print(
        f"bf16 [{args.m}, {args.k}] @ [{args.k}, {args.n}] on "
        f"{c._nki_core_params()['preset']}, timing only"
    )
    print(
        f"{'kernel':<34}{'simulated':>12}{'HFU':>8}{'instr':>9}{'trace+lower':>13}"
        f"{'simulate':>10}{'host':>8}{'host/lib':>10}{'sim/lib':>9}"
    )
    print(
        f"{'library GEMM (kernels::build_gemm)':<34}{lib_us / 1e3:>10.3f}ms"
        f"{100 * lib_hfu:>7.1f}%{lib['instructions']:>9}{lib['build_seconds']:>12.2f}s"
        f"{lib['run_seconds']:>9.2f}s{lib_host:>7.2f}s{1.0:>10.2f}{1.0:>9.2f}"
    )
    for name in names:
        kernel = getattr(mod, name)
        bench = nki.benchmark(warmup=5, iters=10)(kernel)
        t0 = time.perf_counter()
        bench(lhsT, rhs)
        host = time.perf_counter() - t0
        info = bench.benchmark_result.info
        lower = info.trace_seconds + info.build_seconds + info.convert_seconds + info.lower_seconds
        us = bench.benchmark_result.nc_latency.get_latency_percentile(99)
        print(
            f"{name:<34}{us / 1e3:>10.3f}ms{100 * info.hfu:>7.1f}%{info.instructions:>9}"
            f"{lower:>12.2f}s{info.run_seconds:>9.2f}s{host:>7.2f}s{host / lib_host:>10.2f}"
            f"{us / lib_us:>9.2f}"
        )
        engines = ", ".join(
            f"{k} {v / 1e3:.2f} ms" for k, v in sorted(info.engines.items()) if v > 0
        )
        print(f"    busy: {engines}")


if __name__ == "__main__":
    main()
