"""The NKI import names: neuronxcc.nki and nki resolve to neuronsim's front end, a real
installation of either wins unless NEURON_SIM=1 (and then the first kernel says which NKI runs),
and grids spread over the two physical cores of a trn2 logical core."""

import textwrap

from conftest import run_python

KERNEL = """
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

@nki.jit
def copy(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(x))
    return out

x = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
assert (copy(x) == x).all()
print("ran", nki.__name__)
"""


def _fake_real_package(tmp_path):
    """A stand-in for an installed neuronx-cc: a neuronxcc package with its own nki."""
    pkg = tmp_path / "site" / "neuronxcc"
    (pkg / "nki").mkdir(parents=True)
    (pkg / "__init__.py").write_text("REAL = True\n")
    (pkg / "nki" / "__init__.py").write_text("REAL_NKI = True\n")
    return str(tmp_path / "site")


def test_names_are_neuronsims_without_a_real_package():
    r = run_python(KERNEL)
    assert r.returncode == 0, r.stderr
    assert "ran neuronsim.nki.legacy" in r.stdout
    assert "neuronsim: NKI kernels run on" not in r.stderr


def test_a_real_package_wins_unless_neuron_sim(tmp_path):
    site = _fake_real_package(tmp_path)
    r = run_python(
        "import neuronxcc, neuronxcc.nki as n; print(neuronxcc.REAL, n.REAL_NKI)",
        env={"PYTHONPATH": site},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True True"
    r = run_python(KERNEL, env={"PYTHONPATH": site, "NEURON_SIM": "1"})
    assert r.returncode == 0, r.stderr
    assert "ran neuronsim.nki.legacy" in r.stdout
    assert r.stderr.count("neuronsim: NKI kernels run on neuronsim's simulated trn1") == 1


def test_grids_on_the_two_cores_of_a_trn2_logical_core():
    code = textwrap.dedent("""
        import numpy as np
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl
        import nki as nki2
        import nki.language as nl2

        @nki.jit
        def add(a, b):
            c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            ix = nl.program_id(0) * 128 + nl.arange(128)[:, None]
            iy = nl.program_id(1) * 64 + nl.arange(64)[None, :]
            nl.store(c[ix, iy], value=nl.load(a[ix, iy]) + nl.load(b[ix, iy]))
            return c

        @nki2.jit
        def halves(x):
            out = nl2.ndarray(x.shape, dtype=x.dtype, buffer=nl2.shared_hbm)
            p = nl2.program_id(0)
            t = nl2.load(x[p * 128:(p + 1) * 128, :])
            nl2.store(out[p * 128:(p + 1) * 128, :], value=nl2.multiply(t, 2.0))
            return out

        a = np.random.rand(512, 128).astype(np.float32)
        b = np.random.rand(512, 128).astype(np.float32)
        c = add[nl.spmd_dim(2, nl.nc(2)), 2](a, b)
        assert np.array_equal(c, a + b)
        x = np.random.rand(256, 32).astype(np.float32)
        assert np.array_equal(halves[2](x), 2 * x)
        bench = nki.benchmark()(add[nl.spmd_dim(2, nl.nc(2)), 2])
        bench(a, b)
        print("grid", bench.benchmark_result.info.engines.get("pcore1 DMA (busiest queue)", 0) > 0)
    """)
    r = run_python(code, env={"NEURON_SIM_PRESET": "trn2"})
    assert r.returncode == 0, r.stderr
    assert "grid True" in r.stdout
