"""Kernels the NKI compiler or the chip rejects: each is one line naming the rule, the value and
the kernel's source line (the line marked ``# error: <rule>`` below), never a crash, a hang or a
wrong value."""

import inspect
import os

import ml_dtypes
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from neuronsim.nki import NkiError

F32 = np.float32
X128 = np.ones((128, 512), F32)
X256 = np.ones((256, 512), F32)


@nki.jit
def partition_over_128(x):
    t = nl.ndarray((256, 64), dtype=nl.float32, buffer=nl.sbuf)  # error: partition-size
    return t


@nki.jit
def psum_tile_over_2k(x):
    acc = nl.zeros((128, 1024), nl.float32, buffer=nl.psum)  # error: psum-tile-size
    return acc


@nki.jit
def stationary_over_128(x):
    a = nl.load(x[0:128, 0:256])
    b = nl.load(x[0:128, 0:512])
    r = nisa.nc_matmul(a, b)  # error: matmul-stationary-size
    return r


@nki.jit
def moving_over_512(x):
    y = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf)
    a = nl.load(x[0:128, 0:128])
    r = nisa.nc_matmul(a, y)  # error: matmul-moving-size
    return r


@nki.jit
def contraction_mismatch(x):
    a = nl.load(x[0:128, 0:128])
    b = nl.load(x[0:64, 0:512])
    r = nisa.nc_matmul(a, b)  # error: shape-mismatch
    return r


@nki.jit
def sbuf_full(x):
    t = nl.ndarray((128, 60000), dtype=nl.float32, buffer=nl.sbuf)  # error: sbuf-capacity
    nl.store(x[0:128, 0:512], value=t[:, 0:512])
    return x


@nki.jit
def psum_full(x):
    tiles = []
    for _i in range(9):
        tiles.append(nl.zeros((128, 512), nl.float32, buffer=nl.psum))  # error: psum-capacity
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    for t in tiles:
        nl.store(out, value=nl.copy(t))
    return out


@nki.jit
def matmul_int8(x):
    a = nl.load(x[0:128, 0:128], dtype=nl.int8)
    b = nl.load(x[0:128, 0:512], dtype=nl.int8)
    return nisa.nc_matmul(a, b)  # error: dtype-support


@nki.jit
def matmul_fp32_bf16(x):
    a = nl.load(x[0:128, 0:128])
    b = nl.load(x[0:128, 0:512], dtype=nl.bfloat16)
    return nisa.nc_matmul(a, b)  # error: dtype-support


@nki.jit
def read_past_end(x):
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(3):
        t = nl.load(x[i * 128 : (i + 1) * 128, :])  # error: out-of-bounds
        nl.store(out, value=t)
    return out


@nki.jit
def load_from_sbuf(x):
    t = nl.load(x)
    u = nl.load(t)  # error: data-movement
    return u


@nki.jit
def store_from_psum(x):
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    nl.store(out, value=acc)  # error: data-movement
    return out


@nki.jit
def matmul_from_psum(x):
    a = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
    b = nl.load(x)
    return nisa.nc_matmul(a, b)  # error: data-movement


@nki.jit
def carried_dependence(x):
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(2):
        t = nl.load(x[i * 128 : (i + 1) * 128, :])
        acc[...] = nl.add(acc, t)  # error: affine-range-dependence
    nl.store(out, value=acc)
    return out


@nki.jit
def tile_shapes_differ(x):
    a = nl.load(x[0:128, 0:512])
    b = nl.load(x[0:128, 0:256])
    return a + b  # error: shape-mismatch


@nki.jit
def both_inputs_in_psum(x):
    a = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    b = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
    return nl.add(a, b)  # error: both-inputs-psum


@nki.jit
def reduce_partitions(x):
    t = nl.load(x)
    return nl.sum(t, axis=0)  # error: partition-reduce


@nki.jit
def tile_used_after_its_loop(x):
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        t = nl.load(x[i * 128 : (i + 1) * 128, :])
    nl.store(out, value=t)  # error: tile-scope
    return out


@nki.jit
def python_if_on_loop_index(x):
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        if i == 0:  # error: symbolic-index
            nl.store(out, value=nl.load(x[0:128, :]))
    return out


@nki.jit
def alu_op_not_an_alu(x):
    t = nl.load(x)
    return nisa.tensor_tensor(t, t, op=nl.exp)  # error: alu-op


@nki.jit
def activation_not_a_function(x):
    t = nl.load(x)
    return nisa.activation(op=np.add, data=t)  # error: activation-function


@nki.jit
def mask_two_indices(x):
    i_p, i_f = nl.mgrid[0:128, 0:512]
    return nl.load(x[i_p, i_f], mask=(i_p + i_f < 100))  # error: mask


@nki.jit
def nc2_on_trn1(x):
    return nl.load(x)


CASES = [
    (partition_over_128, (X128,)),
    (psum_tile_over_2k, (X128,)),
    (stationary_over_128, (X128,)),
    (moving_over_512, (X128,)),
    (contraction_mismatch, (X128,)),
    (sbuf_full, (X128,)),
    (psum_full, (X128,)),
    (matmul_int8, (X128,)),
    (matmul_fp32_bf16, (X128,)),
    (read_past_end, (X256,)),
    (load_from_sbuf, (X128,)),
    (store_from_psum, (X128,)),
    (matmul_from_psum, (X128,)),
    (carried_dependence, (X256,)),
    (tile_shapes_differ, (X128,)),
    (both_inputs_in_psum, (X128,)),
    (reduce_partitions, (X128,)),
    (tile_used_after_its_loop, (X256,)),
    (python_if_on_loop_index, (X256,)),
    (alu_op_not_an_alu, (X128,)),
    (activation_not_a_function, (X128,)),
    (mask_two_indices, (X128,)),
]


def _marked_line(kernel):
    lines, first = inspect.getsourcelines(kernel.fn)
    for i, text in enumerate(lines):
        if "# error: " in text:
            return first + i, text.split("# error: ")[1].strip()
    raise AssertionError("no marked line")


@pytest.mark.parametrize("kernel,args", CASES, ids=[k.fn.__name__ for k, _ in CASES])
def test_rejected_with_rule_and_line(kernel, args):
    line, rule = _marked_line(kernel)
    with pytest.raises(NkiError) as e:
        kernel(*args)
    msg = str(e.value)
    assert "\n" not in msg
    assert e.value.rule == rule, msg
    assert msg.startswith(f"{os.path.basename(__file__)}:{line}: {rule}: "), msg


def test_float64_input_named():
    with pytest.raises(NkiError, match=r"^dtype-support: argument x is float64"):
        load_from_sbuf(np.ones((128, 512)))


def test_nc2_needs_two_physical_cores():
    with pytest.raises(NkiError, match=r"^grid: .*trn2"):
        nc2_on_trn1[nl.spmd_dim(1, nl.nc(2))](X128)


def test_errors_leave_the_device_usable():
    with pytest.raises(NkiError):
        read_past_end(X256)
    x = np.arange(128 * 512, dtype=np.float32).reshape(128, 512)
    y = nki.simulate_kernel(nc2_on_trn1_free_copy, x)
    np.testing.assert_array_equal(y, x)


@nki.jit
def nc2_on_trn1_free_copy(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(x))
    return out


def test_bfloat16_arguments_are_accepted():
    x = np.ones((128, 64), ml_dtypes.bfloat16)
    np.testing.assert_array_equal(nc2_on_trn1_free_copy(x), x)
