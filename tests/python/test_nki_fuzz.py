"""A fixed-seed fuzzer of random valid NKI tile programs (shapes, dtypes, engines, masks)
checked against numpy: each program loads masked row tiles of random-sized inputs, applies a
random chain of ALU, scalar, activation and reduction instructions on random engines, and
stores the result."""

import ml_dtypes
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest

SEED = 20260508
PROGRAMS = 24

BINARY = {
    "add": (nl.add, np.add),
    "subtract": (nl.subtract, np.subtract),
    "multiply": (nl.multiply, np.multiply),
    "maximum": (nl.maximum, np.maximum),
    "minimum": (nl.minimum, np.minimum),
}
ACTIVATIONS = {
    "tanh": (nl.tanh, np.tanh),
    "sigmoid": (nl.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    "relu": (nl.relu, lambda x: np.maximum(x, 0)),
    "square": (nl.square, np.square),
    "abs": (nl.abs, np.abs),
    "copy": (nl.copy, lambda x: x),
}
DTYPES = [np.float32, np.float32, ml_dtypes.bfloat16, np.float16]


def make_program(rng):
    rows = int(rng.integers(1, 300))
    cols = int(rng.integers(1, 700))
    dtype = DTYPES[int(rng.integers(0, len(DTYPES)))]
    steps = []
    for _ in range(int(rng.integers(1, 6))):
        kind = rng.choice(["binary", "scalar", "act", "reduce_bcast"])
        if kind == "binary":
            steps.append(
                ("binary", str(rng.choice(list(BINARY))), str(rng.choice(["vector", "gpsimd"])))
            )
        elif kind == "scalar":
            steps.append(
                (
                    "scalar",
                    str(rng.choice(["add", "multiply", "maximum"])),
                    float(np.round(rng.uniform(-2, 2), 3)),
                    str(rng.choice(["vector", "scalar", "gpsimd"])),
                )
            )
        elif kind == "act":
            steps.append(("act", str(rng.choice(list(ACTIVATIONS)))))
        else:
            steps.append(("reduce_bcast", str(rng.choice(["sum", "max"]))))
    return rows, cols, dtype, steps


def build_kernel(steps):
    @nki.jit
    def kernel(a, b):
        rows, cols = a.shape
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i_f = nl.arange(cols)[None, :]
        for t in nl.affine_range((rows + 127) // 128):
            i_p = t * 128 + nl.arange(128)[:, None]
            x = nl.load(a[i_p, i_f], mask=(i_p < rows), dtype=nl.float32)
            y = nl.load(b[i_p, i_f], mask=(i_p < rows), dtype=nl.float32)
            for step in steps:
                if step[0] == "binary":
                    x = nisa.tensor_tensor(
                        x,
                        y,
                        op=BINARY[step[1]][0],
                        engine=getattr(nisa, step[2] + "_engine"),
                        mask=(i_p < rows),
                    )
                elif step[0] == "scalar":
                    x = nisa.tensor_scalar(
                        x,
                        op0=BINARY[step[1]][0],
                        operand0=step[2],
                        engine=getattr(nisa, step[3] + "_engine"),
                        mask=(i_p < rows),
                    )
                elif step[0] == "act":
                    x = ACTIVATIONS[step[1]][0](x, mask=(i_p < rows))
                else:
                    r = (nl.sum if step[1] == "sum" else nl.max)(
                        x, axis=1, keepdims=True, mask=(i_p < rows)
                    )
                    x = nl.subtract(x, r, mask=(i_p < rows))
            nl.store(out[i_p, i_f], value=x, mask=(i_p < rows))
        return out

    return kernel


def reference(a, b, steps):
    x = a.astype(np.float32)
    y = b.astype(np.float32)
    for step in steps:
        if step[0] == "binary":
            x = BINARY[step[1]][1](x, y)
        elif step[0] == "scalar":
            x = BINARY[step[1]][1](x, np.float32(step[2]))
        elif step[0] == "act":
            x = ACTIVATIONS[step[1]][1](x)
        else:
            r = x.sum(axis=1, keepdims=True) if step[1] == "sum" else x.max(axis=1, keepdims=True)
            x = x - r
        x = x.astype(np.float32)
    return x


@pytest.mark.parametrize("index", range(PROGRAMS))
def test_random_tile_program(index):
    rng = np.random.default_rng(SEED + index)
    rows, cols, dtype, steps = make_program(rng)
    a = rng.uniform(-1, 1, (rows, cols)).astype(dtype)
    b = rng.uniform(-1, 1, (rows, cols)).astype(dtype)
    got = build_kernel(steps)(a, b)
    want = reference(a, b, steps)
    assert got.shape == (rows, cols) and got.dtype == np.dtype(dtype)
    # Engines compute in fp32 and round once on store; sums are folded in another order.
    tol = {np.dtype(np.float32): 1e-4, np.dtype(np.float16): 2e-3}.get(np.dtype(dtype), 1.6e-2)
    np.testing.assert_allclose(
        got.astype(np.float32),
        want.astype(dtype).astype(np.float32),
        rtol=tol,
        atol=tol * max(1.0, float(np.abs(want).max())),
        err_msg=f"program {steps} on {rows}x{cols} {np.dtype(dtype)}",
    )
