"""torch.neuron call for call with torch.cuda: every function takes the parameters its
torch.cuda counterpart takes (same names, so keyword calls work), and a device given as None,
an int, a string or a torch.device."""

import inspect

import neuronsim  # noqa: F401
import pytest
import torch

n = torch.neuron

DEVICE_FUNCTIONS = [
    "memory_stats",
    "memory_stats_as_nested_dict",
    "memory_summary",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "reset_peak_memory_stats",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "mem_get_info",
    "get_device_name",
    "get_device_properties",
    "get_device_capability",
    "synchronize",
    "current_stream",
    "default_stream",
    "get_rng_state",
]


@pytest.mark.parametrize("name", DEVICE_FUNCTIONS + ["set_rng_state", "set_device", "stream"])
def test_parameters_match_torch_cuda(name):
    ours = inspect.signature(getattr(n, name)).parameters
    theirs = inspect.signature(getattr(torch.cuda, name)).parameters
    missing = [
        p for p in theirs if p not in ours and theirs[p].kind != inspect.Parameter.VAR_KEYWORD
    ]
    assert not missing, f"torch.neuron.{name} lacks {missing}"


@pytest.mark.parametrize("name", DEVICE_FUNCTIONS)
@pytest.mark.parametrize("dev", [None, 1, "neuron:1", torch.device("neuron", 1), "neuron"])
def test_device_argument_forms(name, dev):
    torch.ones(4, device="neuron:1")
    fn = getattr(n, name)
    r = fn(device=dev)
    again = fn(dev)
    if name == "get_rng_state":
        assert torch.equal(r, again)
    elif name == "get_device_properties":
        assert r.name == again.name
    elif name not in ("memory_summary", "current_stream", "default_stream"):
        assert r == again
    if name in ("current_stream", "default_stream"):
        assert r.device_index == (n.current_device() if dev in (None, "neuron") else 1)


def test_unknown_device_type_is_a_clear_error():
    with pytest.raises(ValueError, match="neuron"):
        n.memory_stats("foo")
    with pytest.raises(ValueError, match="expected a neuron device"):
        n.memory_allocated("cuda:0")
    with pytest.raises(ValueError, match="Incorrect device argument"):  # TorchNeuron's
        n.get_device_name(1.5)


def test_memory_stats_flat_and_nested():
    x = torch.ones(1000, device="neuron")
    flat = n.memory_stats(device=0)
    nested = n.memory_stats_as_nested_dict(device=0)
    assert flat["allocated_bytes.all.current"] >= 4000
    assert nested["allocated_bytes"]["all"]["current"] == flat["allocated_bytes.all.current"]
    assert nested["num_ooms"] == flat["num_ooms"]

    # Flattening the nested form gives the flat one back.
    def flatten(d, prefix=""):
        for k, v in d.items():
            if isinstance(v, dict):
                yield from flatten(v, f"{prefix}{k}.")
            else:
                yield f"{prefix}{k}", v

    # TorchNeuron's keys ride along in memory_stats (memory_stats_as_nested_dict is CUDA's).
    cuda_keys = {
        k: v
        for k, v in flat.items()
        if not isinstance(v, dict) and k not in ("num_tensor_frees", "allocation_requests")
    }
    assert dict(flatten(nested)) == cuda_keys
    assert flat["allocated_bytes"]["current"] == flat["allocated_bytes.all.current"]
    summary = n.memory_summary(device="neuron:0", abbreviated=True)
    assert "Allocated memory" in summary and "from small pool" not in summary
    assert "from small pool" in n.memory_summary(0)
    del x


def test_reset_accumulated_memory_stats():
    torch.ones(1000, device="neuron")
    n.reset_accumulated_memory_stats(device=torch.device("neuron:0"))
    assert n.memory_stats(0)["allocated_bytes.all.allocated"] == 0


def test_device_capability_follows_the_preset():
    assert n.get_device_capability(device=0) == (2, 0)  # trn1: NeuronCore-v2


def test_default_generators():
    gens = n.default_generators
    assert len(gens) == n.device_count()
    assert [g.device for g in gens] == [torch.device("neuron", i) for i in range(n.device_count())]
    gens[1].manual_seed(3)
    assert n.default_generators[1].initial_seed() == 3


def test_event_timing_semantics():
    e, f = n.Event(), n.Event()
    e.record()
    f.record()
    f.synchronize()
    with pytest.raises((RuntimeError, ValueError), match="enable_timing"):
        e.elapsed_time(f)
    e, f = n.Event(enable_timing=True), n.Event(enable_timing=True)
    e.record()
    torch.ones(256, 256, device="neuron") @ torch.ones(256, 256, device="neuron")
    f.record()
    f.synchronize()
    assert e.elapsed_time(f) > 0 and e.query() and f.query()


def test_stream_context_managers():
    s = n.Stream(device=1)
    with n.stream(s):
        assert n.current_stream() == s and n.current_device() == 1
    assert n.current_device() == 0 and n.current_stream(1) != s
    with n.StreamContext(None):
        pass
    with s:
        assert n.current_stream(1) == s
    with n.device(device="neuron:1"):
        assert n.current_device() == 1
    assert n.current_device() == 0
