"""Registration of the ``neuron`` device: ``import neuronsim`` and the ``NEURON_SIM=1`` autoload.

In-process tests use the device registered by conftest (``import neuronsim``). The autoload tests
need a fresh interpreter each; they run concurrently (module fixture) to keep the suite fast.
"""

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from conftest import run_python

# ---------------------------------------------------------------------------------------------
# Fresh-interpreter scenarios (started together, checked by the tests at the end of the module).

_AUTOLOAD = """
    import sys
    import torch
    x = torch.ones(2, device="neuron")
    print("device", x.device)
    print("values", (x + 1).cpu().tolist())
    print("count", torch.neuron.device_count())
    print("accelerator", torch.accelerator.current_accelerator())
    print("imported", "neuronsim" in sys.modules)
"""

_NO_ENV = """
    import sys
    import torch
    print("backend", torch._C._get_privateuse1_backend_name())
    print("has_module", hasattr(torch, "neuron"))
    print("extension_loaded", "neuronsim._C" in sys.modules)
    try:
        torch.ones(2, device="neuron")
        print("device_use ok")
    except RuntimeError as e:
        print("device_use error")
    print("cpu", (torch.ones(3) * 3).tolist())
    # An explicit import afterwards still registers the device.
    import neuronsim
    print("after_import", torch.ones(2, device="neuron").device, neuronsim.get_executed_ops())
"""

_BROKEN_PRESET = """
    import warnings
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        import torch
    print("import_warnings", [str(x.message) for x in w if "neuron" in str(x.message).lower()])
    print("cpu", (torch.arange(4) * 2).tolist())
    print("available", torch.neuron.is_available(), torch.neuron.device_count())
    try:
        torch.ones(2, device="neuron")
        print("device_use ok")
    except RuntimeError as e:
        print("device_use_error", str(e).splitlines()[0])
    print("cpu_after", (torch.arange(4) + 1).tolist())
"""

# The extension fails to load (as a broken build would): `import torch` must still succeed.
_BROKEN_EXTENSION = """
    import sys, warnings

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name == "neuronsim._C":
                raise ImportError("simulated broken extension")
            return None

    sys.meta_path.insert(0, Block())
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        import torch
    print("warnings", [(x.category.__name__, str(x.message)) for x in w
                       if "neuron" in str(x.message).lower()])
    print("cpu", (torch.ones(3) + 1).tolist())
"""

_SCRIPTS = {
    "autoload": (_AUTOLOAD, {"NEURON_SIM": "1"}),
    "no_env": (_NO_ENV, {}),
    "broken_preset": (_BROKEN_PRESET, {"NEURON_SIM": "1", "NEURON_SIM_PRESET": "does_not_exist"}),
    "broken_extension": (_BROKEN_EXTENSION, {"NEURON_SIM": "1"}),
}


@pytest.fixture(scope="module", autouse=True)
def runs():  # autouse: the interpreters start with the module's first test
    pool = ThreadPoolExecutor(max_workers=len(_SCRIPTS))
    futures = {k: pool.submit(run_python, code, env) for k, (code, env) in _SCRIPTS.items()}
    yield futures
    pool.shutdown(wait=True)


def _result(runs, name):
    r = runs[name].result()
    assert r.returncode == 0, f"{name} failed:\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return {
        line.split(" ", 1)[0]: line.split(" ", 1)[1] if " " in line else ""
        for line in r.stdout.splitlines()
    }


# ---------------------------------------------------------------------------------------------
# In-process: the device registered by `import neuronsim`.


def test_backend_is_renamed_to_neuron():
    assert torch._C._get_privateuse1_backend_name() == "neuron"
    import neuronsim.device_module

    assert torch.neuron is neuronsim.device_module


def test_device_objects():
    d = torch.device("neuron")
    assert d.type == "neuron" and d.index is None
    d1 = torch.device("neuron:1")
    assert d1.type == "neuron" and d1.index == 1
    assert torch.device("neuron", 1) == d1
    assert torch.ones(2, device="neuron:1").device == d1
    assert torch.ones(2, device=d1).device == d1
    # No index: the current device (0).
    assert torch.ones(2, device="neuron").device == torch.device("neuron", 0)


def test_tensor_neuron_method_and_is_neuron():
    cpu = torch.arange(6.0).reshape(2, 3)
    assert not cpu.is_neuron
    x = cpu.neuron()
    assert x.is_neuron
    assert x.device == torch.device("neuron", 0)
    assert torch.equal(x.cpu(), cpu)
    y = cpu.neuron(1)
    assert y.device == torch.device("neuron", 1)
    assert torch.equal(y.cpu(), cpu)


def test_tensor_to_neuron():
    cpu = torch.arange(6, dtype=torch.int32)
    for target in ("neuron", "neuron:1", torch.device("neuron", 0)):
        x = cpu.to(target)
        assert x.is_neuron and x.dtype == torch.int32
        assert torch.equal(x.cpu(), cpu)
    z = cpu.to("neuron", dtype=torch.float32)
    assert z.dtype == torch.float32 and z.is_neuron
    assert torch.equal(z.cpu(), cpu.float())
    # .to on a neuron tensor to its own device is a no-op returning the same tensor.
    assert z.to("neuron:0") is z


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)).eval()


@pytest.mark.filterwarnings("ignore:neuronsim")  # batch norm may take the CPU fallback
def test_module_to_neuron():
    model = _model()
    inp = torch.randn(5, 4)
    expected = model(inp)
    model.to("neuron")
    for t in list(model.parameters()) + list(model.buffers()):
        assert t.device == torch.device("neuron", 0)
    out = model(inp.to("neuron"))
    assert out.device == torch.device("neuron", 0)
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-5, atol=1e-5)


def test_module_neuron_method():
    model = _model()
    assert model.neuron() is model
    assert all(p.is_neuron for p in model.parameters())
    assert all(b.is_neuron for b in model.buffers())
    model.neuron(1)
    assert all(p.device == torch.device("neuron", 1) for p in model.parameters())


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
def test_storage_neuron():
    cpu = torch.arange(4.0)
    s = cpu.untyped_storage().neuron()
    assert s.device == torch.device("neuron", 0)
    assert s.is_neuron
    assert s.nbytes() == cpu.untyped_storage().nbytes()
    t = torch.empty(0, device="neuron").set_(s)
    assert torch.equal(t.cpu(), cpu)
    typed = cpu.storage().neuron()
    assert typed.device.type == "neuron"
    assert typed.tolist() == cpu.tolist()


def test_accelerator_api():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch.accelerator.device_count() == 2  # trn1.2xlarge: two NeuronCores
    assert torch.accelerator.device_count() == torch.neuron.device_count()
    assert torch.accelerator.current_device_index() == torch.neuron.current_device()


# ---------------------------------------------------------------------------------------------
# Autoload (fresh interpreters).


def test_autoload_with_neuron_sim_registers_device(runs):
    out = _result(runs, "autoload")
    assert out["device"] == "neuron:0"
    assert out["values"] == "[2.0, 2.0]"
    assert out["count"] == "2"
    assert out["accelerator"] == "neuron"
    assert out["imported"] == "True"


def test_without_neuron_sim_import_torch_leaves_no_neuron_device(runs):
    out = _result(runs, "no_env")
    assert out["backend"] == "privateuseone"
    assert out["has_module"] == "False"
    assert out["extension_loaded"] == "False"
    assert out["device_use"] == "error"
    assert out["cpu"] == "[3.0, 3.0, 3.0]"
    # `import neuronsim` later still registers the device.
    assert out["after_import"].startswith("neuron:0 ")


def test_autoload_with_bad_preset_keeps_torch_working(runs):
    out = _result(runs, "broken_preset")
    assert out["cpu"] == "[0, 2, 4, 6]"
    assert out["available"] == "False 0"
    # The first device use raises a clear error naming the preset.
    assert "device_use_error" in out, out
    msg = out["device_use_error"]
    assert "does_not_exist" in msg and "preset" in msg
    assert out["cpu_after"] == "[1, 2, 3, 4]"


def test_autoload_never_raises_when_registration_fails(runs):
    out = _result(runs, "broken_extension")
    assert out["cpu"] == "[2.0, 2.0, 2.0]"
    warns = out["warnings"]
    assert "RuntimeWarning" in warns
    assert "simulated broken extension" in warns
    assert "NEURON_SIM=1" in warns
