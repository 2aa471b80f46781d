"""An NKI kernel on the simulated NeuronCore: values against numpy, then its benchmark.

python examples/nki_quickstart.py
neuronsim run --trace out/nki_trace.json examples/nki_quickstart.py
neuronsim nki lines out/nki_trace.json
neuronsim whatif --sweep hbm.bandwidth_gbps=205,410,820 examples/nki_quickstart.py
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np


@nki.jit
def scaled_add(a, b):
    """c = 2 a + b over [rows, 512] tiles of 128 rows (the last one masked)."""
    c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows, cols = a.shape
    i_f = nl.arange(cols)[None, :]
    for t in nl.affine_range((rows + 127) // 128):
        i_p = t * 128 + nl.arange(128)[:, None]
        x = nl.load(a[i_p, i_f], mask=(i_p < rows))
        y = nl.load(b[i_p, i_f], mask=(i_p < rows))
        nl.store(c[i_p, i_f], value=nl.add(nl.multiply(x, 2.0), y), mask=(i_p < rows))
    return c


if __name__ == "__main__":
    a = np.random.rand(1000, 512).astype(np.float32)
    b = np.random.rand(1000, 512).astype(np.float32)
    c = scaled_add(a, b)
    print("matches numpy:", np.allclose(c, 2 * a + b))

    bench = nki.benchmark(warmup=5, iters=10)(scaled_add)
    bench(nt.tensor[[8192, 512], nl.float32], nt.tensor[[8192, 512], nl.float32])
    us = bench.benchmark_result.nc_latency.get_latency_percentile(50)
    print(f"scaled_add on [8192, 512] fp32: {us:.2f} us simulated")
