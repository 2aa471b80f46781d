"""``torch.neuron``, the device module: devices, properties, streams, events and the simulated
clocks.

Configurations other than the default (trn1.2xlarge, two NeuronCores) run in fresh interpreters,
started together by a module fixture.
"""

import json
from concurrent.futures import ThreadPoolExecutor

import neuronsim
import pytest
import torch
from conftest import run_python

GiB = 1 << 30

# ---------------------------------------------------------------------------------------------
# Fresh-interpreter scenarios.

_COUNT = """
    import json, torch, neuronsim
    out = {"count": torch.neuron.device_count(), "available": torch.neuron.is_available(),
           "accel_count": torch.accelerator.device_count()}
    try:
        x = torch.ones(2, device="neuron")
        out["device"] = str(x.device)
        props = torch.neuron.get_device_properties(0)
        out["total_memory"] = props.total_memory
        out["physical_core"] = props.physical_core
        out["name"] = props.name
    except RuntimeError as e:
        out["error"] = str(e)
    try:
        torch.ones(2, device=f"neuron:{out['count']}")
        out["past_end"] = "no error"
    except RuntimeError as e:
        out["past_end"] = str(e)
    print(json.dumps(out))
"""

# Event timings and the two clocks for a fixed program: deterministic, and with
# NEURON_LAUNCH_BLOCKING=1 the host clock catches up with the device after every op.
_TIMING = """
    import json, torch, neuronsim
    n = torch.neuron

    def timed(size):
        a = torch.ones(size, size, device="neuron")
        n.synchronize()
        start, end = n.Event(enable_timing=True), n.Event(enable_timing=True)
        start.record()
        a @ a
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    small, big = timed(64), timed(1024)
    a = torch.ones(512, 512, device="neuron")
    n.synchronize()
    lags = []  # host clock minus device clock right after each launch
    for _ in range(8):
        a = a @ a * 0.001
        lags.append(neuronsim.host_time_ns() - neuronsim.simulated_time_ns())
    n.synchronize()
    print(json.dumps({"small": small, "big": big, "lags": lags,
                      "host": neuronsim.host_time_ns(), "device": neuronsim.simulated_time_ns()}))
"""

_SCRIPTS = {
    "num_cores_1": (_COUNT, {"NEURON_RT_NUM_CORES": "1"}),
    "visible_1": (_COUNT, {"NEURON_RT_VISIBLE_CORES": "1"}),
    "trn2": (_COUNT, {"NEURON_SIM_PRESET": "trn2"}),
    "invalid_core": (_COUNT, {"NEURON_RT_VISIBLE_CORES": "7"}),
    "timing_a": (_TIMING, {}),
    "timing_b": (_TIMING, {}),
    "timing_blocking": (_TIMING, {"NEURON_LAUNCH_BLOCKING": "1"}),
}


@pytest.fixture(scope="module", autouse=True)
def runs():  # autouse: the interpreters start with the module's first test
    pool = ThreadPoolExecutor(max_workers=4)
    futures = {k: pool.submit(run_python, code, env) for k, (code, env) in _SCRIPTS.items()}
    yield futures
    pool.shutdown(wait=True)


def _json(runs, name):
    r = runs[name].result()
    assert r.returncode == 0, f"{name} failed:\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture
def restore_device():
    prev = torch.neuron.current_device()
    yield
    torch.neuron.set_device(prev)


# ---------------------------------------------------------------------------------------------
# Availability and device selection.


def test_available_and_count():
    assert torch.neuron.is_available()
    assert torch.neuron.device_count() == 2
    torch.ones(1, device="neuron")
    assert torch.neuron.is_initialized()


def test_set_device_moves_new_tensors(restore_device):
    torch.neuron.set_device(1)
    assert torch.neuron.current_device() == 1
    assert torch.empty(3, device="neuron").device == torch.device("neuron", 1)
    assert torch.ones(3, device="neuron").device == torch.device("neuron", 1)
    assert torch.tensor([1.0]).neuron().device == torch.device("neuron", 1)
    torch.neuron.set_device("neuron:0")
    assert torch.neuron.current_device() == 0
    torch.neuron.set_device(torch.device("neuron", 1))
    assert torch.neuron.current_device() == 1
    torch.neuron.set_device(0)
    assert torch.ones(3, device="neuron").device == torch.device("neuron", 0)


def test_device_context_manager(restore_device):
    assert torch.neuron.current_device() == 0
    with torch.neuron.device(1):
        assert torch.neuron.current_device() == 1
        x = torch.zeros(2, device="neuron")
        with torch.neuron.device("neuron:0"):
            assert torch.zeros(2, device="neuron").device.index == 0
        assert torch.neuron.current_device() == 1
    assert x.device == torch.device("neuron", 1)
    assert torch.neuron.current_device() == 0
    # Restored on exceptions too.
    with pytest.raises(ValueError), torch.neuron.device(1):
        raise ValueError
    assert torch.neuron.current_device() == 0
    with torch.device("neuron:1"):
        assert torch.ones(1).device == torch.device("neuron", 1)


def test_ops_stay_on_the_operands_device(restore_device):
    x = torch.arange(4.0, device="neuron:1")
    y = x * 2 + 1
    assert y.device == torch.device("neuron", 1)
    assert y.cpu().tolist() == [1.0, 3.0, 5.0, 7.0]
    assert torch.neuron.current_device() == 0


def test_invalid_device_index_is_a_clear_error(restore_device):
    with pytest.raises(RuntimeError, match="Invalid neuron device index 5"):
        torch.neuron.set_device(5)
    with pytest.raises(RuntimeError, match="Invalid neuron device index 2"):
        torch.ones(1, device="neuron:2")
    assert torch.neuron.current_device() == 0


INVALID_INDEX_USES = {
    "get_device_properties": lambda: torch.neuron.get_device_properties(7),
    "memory_allocated": lambda: torch.neuron.memory_allocated(7),
    "synchronize": lambda: torch.neuron.synchronize(7),
    "Stream": lambda: torch.neuron.Stream(device=7),
    "get_rng_state": lambda: torch.neuron.get_rng_state(7),
    "Generator": lambda: torch.Generator(device="neuron:7"),
}


@pytest.mark.parametrize("use", list(INVALID_INDEX_USES))
def test_invalid_device_index_is_rejected(use):
    # As on CUDA: naming a device that does not exist is an error, not a silent no-op.
    # (get_device_name(7) is "neuron:7", as TorchNeuron formats it without asking the runtime.)
    with pytest.raises(RuntimeError, match="7"):
        INVALID_INDEX_USES[use]()


def test_synchronize_brings_host_clock_to_device_clock():
    a = torch.ones(512, 512, device="neuron")
    a @ a
    torch.neuron.synchronize()
    assert neuronsim.host_time_ns() >= neuronsim.simulated_time_ns()
    torch.neuron.synchronize(1)
    torch.neuron.synchronize("neuron:0")
    torch.accelerator.synchronize()


def test_device_name_and_properties():
    # As TorchNeuron reports them: the device string, and the instance family.
    assert torch.neuron.get_device_name() == "neuron:0"
    assert torch.neuron.get_device_name(1) == "neuron:1"
    assert torch.neuron.get_device_name(torch.device("neuron", 1)) == "neuron:1"
    props = torch.neuron.get_device_properties(0)
    assert props.name == "trn1"
    assert props.total_memory == 16 * GiB
    assert repr(props) == f"<NeuronDeviceProperties(name='trn1', total_memory={16 * GiB})>"
    assert torch.neuron.get_device_properties("neuron:1").total_memory == 16 * GiB
    assert torch.neuron.get_device_properties(1).physical_core == 1
    assert "total_memory" in repr(props)


def test_amp_dtypes():
    assert torch.neuron.is_bf16_supported()
    assert torch.bfloat16 in torch.neuron.get_amp_supported_dtype()
    assert torch.float16 in torch.neuron.get_amp_supported_dtype()


def test_autocast_on_neuron():
    a = torch.randn(8, 8, device="neuron")
    try:
        with torch.autocast("neuron", dtype=torch.bfloat16):
            mm = a @ a
            s = a + a
    except NotImplementedError as e:  # keep the report short: the dispatcher lists every key
        pytest.fail(f"autocast on neuron fails: {str(e).splitlines()[0]}")
    assert mm.dtype == torch.bfloat16  # matmul runs in the autocast dtype, as on CUDA
    assert s.dtype == torch.float32
    torch.testing.assert_close(mm.float().cpu(), (a.cpu() @ a.cpu()), rtol=2e-2, atol=2e-1)


# ---------------------------------------------------------------------------------------------
# Streams and events.


def test_streams_and_stream_context():
    default = torch.neuron.default_stream()
    cur = torch.neuron.current_stream()
    assert cur == default
    assert cur.stream_id == 0
    assert cur.device == torch.device("neuron", 0)
    s = torch.neuron.Stream()
    assert isinstance(s, torch.Stream)
    assert s.device == torch.device("neuron", 0)
    assert s.stream_id != 0
    with torch.neuron.stream(s):
        assert torch.neuron.current_stream() == s
        assert torch.accelerator.current_stream() == s
        y = torch.ones(64, device="neuron") * 3
    assert torch.neuron.current_stream() == default
    s.synchronize()
    assert s.query()
    assert y.cpu().sum().item() == 192.0
    with torch.neuron.stream(None):
        assert torch.neuron.current_stream() == default
    s1 = torch.neuron.Stream(device=1)
    assert s1.device_index == 1
    assert torch.neuron.current_stream(1).device_index == 1


def test_stream_context_on_another_device_restores_the_current_device(restore_device):
    s1 = torch.neuron.Stream(device=1)
    assert torch.neuron.current_device() == 0
    with torch.neuron.stream(s1):
        assert torch.neuron.current_stream(1) == s1
        assert torch.ones(2, device="neuron").device == torch.device("neuron", 1)
    assert torch.neuron.current_device() == 0
    assert torch.neuron.current_stream(1).stream_id == 0
    assert torch.neuron.current_stream(0).stream_id == 0


def test_generic_stream_api():
    s = torch.Stream(device="neuron")
    assert s.device.type == "neuron"
    with s:
        assert torch.accelerator.current_stream() == s
        x = torch.full((8,), 2.0, device="neuron")
    assert torch.accelerator.current_stream().stream_id == 0
    s.synchronize()
    assert x.cpu().tolist() == [2.0] * 8
    e = s.record_event()
    assert e.device.type == "neuron"
    torch.accelerator.current_stream().wait_event(e)
    torch.accelerator.current_stream().wait_stream(s)


def _elapsed(make_event, size):
    a = torch.ones(size, size, device="neuron")
    torch.neuron.synchronize()
    start, end = make_event(), make_event()
    start.record()
    a @ a
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def test_event_elapsed_time_grows_with_work():
    small = _elapsed(lambda: torch.neuron.Event(enable_timing=True), 64)
    big = _elapsed(lambda: torch.neuron.Event(enable_timing=True), 2048)
    assert 0 < small < big
    # 2048^3 multiply-adds take far longer than 64^3 ones (whose time is mostly fixed costs).
    assert big > 10 * small
    # Simulated milliseconds, not host wall time: a 2048^3 matmul on a NeuronCore is far below 1 s.
    assert big < 100


def test_generic_event_api():
    small = _elapsed(lambda: torch.Event(device="neuron", enable_timing=True), 64)
    big = _elapsed(lambda: torch.Event(device="neuron", enable_timing=True), 1024)
    assert 0 < small < big


def test_neuron_events_mix_with_torch_events():
    start = torch.neuron.Event(enable_timing=True)
    end = torch.Event(device="neuron", enable_timing=True)
    assert isinstance(start, torch.Event)
    assert isinstance(start, torch.neuron.Event) and isinstance(end, torch.neuron.Event)
    start.record()
    assert start.device == torch.device("neuron", 0)
    torch.ones(256, 256, device="neuron").sum()
    end.record()
    end.synchronize()
    assert end.elapsed_time(start) < 0 < start.elapsed_time(end)
    torch.neuron.current_stream().record_event(start)


def test_events_with_no_work_between_take_no_time():
    torch.neuron.synchronize()
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    start.record()
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) == 0.0


def test_event_query_follows_simulated_completion():
    a = torch.ones(1024, 1024, device="neuron")
    torch.neuron.synchronize()
    a @ a
    e = torch.neuron.Event()
    e.record()
    # The host has only launched the matmul; the device finishes it later in simulated time.
    assert not e.query()
    assert not torch.neuron.current_stream().query()
    e.synchronize()
    assert e.query()
    assert torch.neuron.current_stream().query()


def test_elapsed_time_needs_recorded_events():
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    start.record()
    with pytest.raises((RuntimeError, ValueError), match="recorded"):
        start.elapsed_time(end)


def test_simulated_and_host_clocks_advance():
    torch.neuron.synchronize()
    d0, h0 = neuronsim.simulated_time_ns(), neuronsim.host_time_ns()
    a = torch.ones(256, 256, device="neuron")
    b = a @ a
    d1, h1 = neuronsim.simulated_time_ns(), neuronsim.host_time_ns()
    assert d1 > d0 and h1 > h0
    b.cpu()  # waits for the device
    assert neuronsim.host_time_ns() >= neuronsim.simulated_time_ns() >= d1
    assert isinstance(d1, float) and isinstance(h1, float)


# ---------------------------------------------------------------------------------------------
# Configurations (fresh interpreters).


def test_num_cores_env_limits_device_count(runs):
    out = _json(runs, "num_cores_1")
    assert out["count"] == 1 and out["accel_count"] == 1 and out["available"]
    assert out["device"] == "neuron:0"
    assert "Invalid neuron device index 1" in out["past_end"]


def test_visible_cores_env_selects_cores(runs):
    out = _json(runs, "visible_1")
    assert out["count"] == 1
    assert out["device"] == "neuron:0"
    assert out["physical_core"] == 1  # logical device 0 is NeuronCore 1
    assert out["total_memory"] == 16 * GiB


def test_trn2_preset_has_four_logical_cores(runs):
    out = _json(runs, "trn2")
    assert out["count"] == 4 and out["accel_count"] == 4
    assert out["total_memory"] == 24 * GiB
    assert "trn2" in out["name"]


def test_invalid_visible_core_is_a_clear_error(runs):
    out = _json(runs, "invalid_core")
    assert out["count"] == 0 and not out["available"]
    assert "error" in out, out
    assert "NeuronCore 7" in out["error"]
    assert "trn1" in out["error"]


def test_event_timing_is_deterministic_across_processes(runs):
    a, b = _json(runs, "timing_a"), _json(runs, "timing_b")
    assert a == b
    assert 0 < a["small"] < a["big"]


def test_launch_blocking_makes_host_wait_for_each_op(runs):
    normal, blocking = _json(runs, "timing_a"), _json(runs, "timing_blocking")
    # Without blocking the host runs ahead of (launches before) the device's work.
    assert min(normal["lags"]) < 0
    # With NEURON_LAUNCH_BLOCKING=1 the host clock has caught up after every op.
    assert all(lag >= 0 for lag in blocking["lags"])
    # Kernel durations themselves do not change.
    assert blocking["small"] == pytest.approx(normal["small"], rel=0.05)
    assert blocking["host"] >= normal["host"]


def test_rejected_configuration_keeps_the_previous_one():
    r = run_python(
        """
        import torch, neuronsim
        neuronsim.configure(preset="trn2")
        try:
            neuronsim.configure(preset="trn9")
        except RuntimeError as e:
            print("rejected:", "trn9" in str(e))
        print(neuronsim._C._config()["preset"])
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["rejected:", "True", "trn2"]
