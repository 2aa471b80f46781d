"""Random numbers on the device: a Philox generator per NeuronCore with a 16-byte state
(seed int64, offset int64); element i of an op is a function of (seed, offset + i // 4), so the
offset advances by ceil(numel / 4) per op."""

import math
import warnings

import neuronsim
import pytest
import torch
import torch.nn.functional as F

DRAWS = {
    "rand": lambda g=None: torch.rand(37, device="neuron", generator=g),
    "randn": lambda g=None: torch.randn(37, device="neuron", generator=g),
    "randint": lambda g=None: torch.randint(0, 1000, (37,), device="neuron", generator=g),
    "bernoulli_p": lambda g=None: torch.bernoulli(
        torch.full((37,), 0.4, device="neuron"), generator=g
    ),
    "bernoulli_": lambda g=None: torch.empty(37, device="neuron").bernoulli_(0.3, generator=g),
    "normal_": lambda g=None: torch.empty(37, device="neuron").normal_(2.0, 3.0, generator=g),
    "uniform_": lambda g=None: torch.empty(37, device="neuron").uniform_(-2, 5, generator=g),
    "random_": lambda g=None: torch.empty(37, device="neuron").random_(0, 50, generator=g),
    "randn_bf16": lambda g=None: torch.randn(
        37, device="neuron", dtype=torch.bfloat16, generator=g
    ),
}


def _state():
    s = torch.neuron.get_rng_state()
    raw = bytes(s.tolist())
    return int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:], "little")


def _dropout(p=0.5, n=37):
    return F.dropout(torch.ones(n, device="neuron"), p=p, training=True)


@pytest.mark.parametrize("name", list(DRAWS) + ["dropout"])
def test_manual_seed_makes_draws_reproducible(name):
    draw = _dropout if name == "dropout" else DRAWS[name]
    torch.neuron.manual_seed(1234)
    a = draw().cpu()
    a2 = draw().cpu()
    torch.neuron.manual_seed(1234)
    b = draw().cpu()
    b2 = draw().cpu()
    assert torch.equal(a, b) and torch.equal(a2, b2)
    assert not torch.equal(a, a2)  # the stream moves on
    torch.neuron.manual_seed(4321)
    assert not torch.equal(draw().cpu(), a)


OTHER_DRAWS = {
    "multinomial": lambda g=None: torch.multinomial(
        torch.ones(50, device="neuron"), 10, generator=g
    ),
    "randperm": lambda g=None: torch.randperm(50, device="neuron", generator=g),
    "normal_tensor": lambda g=None: torch.normal(
        torch.zeros(50, device="neuron"), 1.0, generator=g
    ),
    "exponential_": lambda g=None: torch.empty(50, device="neuron").exponential_(generator=g),
}


@pytest.mark.parametrize("name", list(OTHER_DRAWS))
def test_device_generator_drives_every_random_op(name):
    # Ops without a native kernel must still draw from the neuron generator: seeded by
    # torch.neuron.manual_seed, and accepting a neuron Generator object.
    draw = OTHER_DRAWS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.neuron.manual_seed(99)
        a = draw().cpu()
        torch.neuron.manual_seed(99)
        b = draw().cpu()
        assert torch.equal(a, b), "not reproducible with torch.neuron.manual_seed"
        g = torch.Generator(device="neuron")
        g.manual_seed(5)
        c = draw(g).cpu()
        g.manual_seed(5)
        assert torch.equal(draw(g).cpu(), c)


def test_torch_manual_seed_seeds_the_device():
    torch.manual_seed(77)
    a = torch.rand(16, device="neuron").cpu()
    torch.manual_seed(77)
    b = torch.rand(16, device="neuron").cpu()
    assert torch.equal(a, b)
    assert torch.neuron.initial_seed() == 77
    torch.manual_seed(77)
    assert _state() == (77, 0)
    assert torch.neuron.get_rng_state("neuron:1")[:8].tolist() == [77, 0, 0, 0, 0, 0, 0, 0]


def test_rng_state_is_16_bytes_seed_and_offset():
    torch.neuron.manual_seed(0x0102030405)
    s = torch.neuron.get_rng_state()
    assert s.dtype == torch.uint8 and s.shape == (16,) and s.device.type == "cpu"
    assert _state() == (0x0102030405, 0)
    torch.rand(10, device="neuron")
    assert _state() == (0x0102030405, 3)


def test_set_rng_state_restores_the_stream():
    torch.neuron.manual_seed(5)
    torch.rand(3, device="neuron")
    saved = torch.neuron.get_rng_state()
    x = torch.randn(100, device="neuron").cpu()
    y = torch.rand(7, device="neuron").cpu()
    torch.neuron.set_rng_state(saved)
    assert torch.equal(torch.randn(100, device="neuron").cpu(), x)
    assert torch.equal(torch.rand(7, device="neuron").cpu(), y)
    # A hand-made state: seed 5, offset 1 (past the first rand(3)).
    state = torch.tensor(
        list((5).to_bytes(8, "little") + (1).to_bytes(8, "little")), dtype=torch.uint8
    )
    torch.neuron.set_rng_state(state)
    assert torch.equal(torch.randn(100, device="neuron").cpu(), x)


def test_set_rng_state_rejects_a_bad_state():
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.neuron.set_rng_state(torch.zeros(8, dtype=torch.uint8))


def test_get_and_set_rng_state_all():
    torch.neuron.manual_seed_all(11)
    states = torch.neuron.get_rng_state_all()
    assert len(states) == 2
    a = [torch.rand(5, device=f"neuron:{i}").cpu() for i in range(2)]
    torch.neuron.set_rng_state_all(states)
    b = [torch.rand(5, device=f"neuron:{i}").cpu() for i in range(2)]
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=False))


@pytest.mark.parametrize("numel,blocks", [(1, 1), (4, 1), (5, 2), (8, 2), (1000, 250), (1001, 251)])
def test_offset_advances_by_ceil_numel_over_4(numel, blocks):
    torch.neuron.manual_seed(3)
    torch.randn(numel, device="neuron")
    assert _state() == (3, blocks)
    torch.rand(numel, device="neuron")
    assert _state() == (3, 2 * blocks)
    assert blocks == math.ceil(numel / 4)


def test_stream_is_counter_based():
    # rand(8) covers Philox blocks 0-1; rand(4) twice draws block 0 then block 1.
    torch.neuron.manual_seed(9)
    whole = torch.rand(8, device="neuron").cpu()
    torch.neuron.manual_seed(9)
    parts = torch.cat([torch.rand(4, device="neuron").cpu(), torch.rand(4, device="neuron").cpu()])
    assert torch.equal(whole, parts)


def test_each_core_has_its_own_generator():
    torch.neuron.manual_seed_all(21)
    torch.rand(40, device="neuron:1")
    assert torch.neuron.get_rng_state("neuron:0")[8:].tolist() == [0] * 8
    assert torch.neuron.get_rng_state("neuron:1")[8] == 10
    # Same seed, same offset: the same values on either core.
    torch.neuron.manual_seed_all(21)
    a = torch.rand(6, device="neuron:0").cpu()
    b = torch.rand(6, device="neuron:1").cpu()
    assert torch.equal(a, b)


def test_generator_objects():
    g = torch.Generator(device="neuron")
    assert g.device == torch.device("neuron", 0)
    g.manual_seed(42)
    assert g.initial_seed() == 42
    torch.neuron.manual_seed(1)
    default_before = _state()
    a = {name: draw(g).cpu() for name, draw in DRAWS.items()}
    assert _state() == default_before  # drawing from g leaves the default generator alone
    g.manual_seed(42)
    b = {name: draw(g).cpu() for name, draw in DRAWS.items()}
    assert all(torch.equal(a[k], b[k]) for k in a)
    state = g.get_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    x = torch.rand(9, device="neuron", generator=g).cpu()
    g.set_state(state)
    assert torch.equal(torch.rand(9, device="neuron", generator=g).cpu(), x)
    # Same seed as the default generator: the same stream.
    g.manual_seed(1)
    torch.neuron.manual_seed(1)
    assert torch.equal(
        torch.rand(9, device="neuron", generator=g).cpu(), torch.rand(9, device="neuron").cpu()
    )
    g1 = torch.Generator(device="neuron:1")
    assert g1.device == torch.device("neuron", 1)
    g1.manual_seed(3)
    assert torch.rand(4, device="neuron:1", generator=g1).is_neuron


def test_random_ops_are_native():
    torch.neuron.manual_seed(0)
    neuronsim.clear_op_tracking()
    for draw in DRAWS.values():
        draw()
    _dropout()
    assert neuronsim.get_fallback_ops() == set()
    assert {
        "aten::uniform_",
        "aten::normal_",
        "aten::random_",
        "aten::bernoulli_",
        "aten::native_dropout",
    } <= neuronsim.get_executed_ops()


# ---------------------------------------------------------------------------------------------
# Statistics.

N = 100_000


def test_normal_statistics():
    torch.neuron.manual_seed(2024)
    z = torch.randn(N, device="neuron").cpu().double()
    assert abs(z.mean().item()) < 0.02
    assert abs(z.std().item() - 1) < 0.02
    assert abs((z.abs() < 1).double().mean().item() - 0.6827) < 0.01
    w = torch.empty(N, device="neuron").normal_(3.0, 0.5).cpu().double()
    assert abs(w.mean().item() - 3.0) < 0.01
    assert abs(w.std().item() - 0.5) < 0.01


def test_uniform_statistics():
    torch.neuron.manual_seed(2025)
    u = torch.rand(N, device="neuron").cpu().double()
    assert u.min().item() >= 0 and u.max().item() < 1
    assert abs(u.mean().item() - 0.5) < 0.01
    assert abs(u.var().item() - 1 / 12) < 0.005
    v = torch.empty(N, device="neuron").uniform_(2, 5).cpu().double()
    assert v.min().item() >= 2 and v.max().item() < 5
    assert abs(v.mean().item() - 3.5) < 0.02
    hist = torch.histc(u.float(), bins=10, min=0, max=1)
    assert (hist - N / 10).abs().max().item() < 0.05 * N / 10


def test_randint_statistics():
    torch.neuron.manual_seed(2026)
    r = torch.randint(3, 13, (N,), device="neuron").cpu()
    assert r.dtype == torch.int64
    assert r.min().item() == 3 and r.max().item() == 12
    counts = torch.bincount(r - 3, minlength=10)
    assert (counts - N / 10).abs().max().item() < 0.05 * N / 10


def test_bernoulli_rate():
    torch.neuron.manual_seed(2027)
    b = torch.bernoulli(torch.full((N,), 0.3, device="neuron")).cpu()
    assert set(b.unique().tolist()) == {0.0, 1.0}
    assert abs(b.mean().item() - 0.3) < 0.01
    c = torch.empty(N, device="neuron").bernoulli_(0.8).cpu()
    assert abs(c.mean().item() - 0.8) < 0.01
    # Per-element probabilities.
    p = torch.tensor([0.0, 1.0]).repeat(N // 2).to("neuron")
    assert torch.equal(torch.bernoulli(p).cpu(), p.cpu())


@pytest.mark.parametrize("p", [0.1, 0.25, 0.5])
def test_dropout_scaling(p):
    torch.neuron.manual_seed(2028)
    x = torch.full((N,), 2.0, device="neuron")
    y = F.dropout(x, p=p, training=True).cpu()
    kept = y != 0
    assert abs(1 - kept.double().mean().item() - p) < 0.01
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 2.0 / (1 - p)))
    assert abs(y.double().mean().item() - 2.0) < 0.03
    # Eval mode is the identity.
    assert torch.equal(F.dropout(x, p=p, training=False).cpu(), x.cpu())


def test_dropout_module_reproducible_with_seed():
    m = torch.nn.Dropout(0.5).to("neuron").train()
    x = torch.ones(64, device="neuron")
    torch.neuron.manual_seed(8)
    a = m(x).cpu()
    torch.neuron.manual_seed(8)
    assert torch.equal(m(x).cpu(), a)
