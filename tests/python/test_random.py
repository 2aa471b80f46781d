"""Random numbers on the device, as TorchNeuron draws them: its random ops run on the CPU, so a
neuron draw comes from the CPU default generator (CPU and neuron draws interleave in one stream,
and after torch.manual_seed a run on neuron draws what it draws on the CPU), while the device
generator holds TorchNeuron's 16-byte Philox state (seed, offset) and torch.neuron's RNG calls
leave the CPU stream alone. A generator the user creates draws its own Philox stream, as do
DTensor's offset regions."""

import warnings

import neuronsim
import pytest
import torch
import torch.nn.functional as F
from neuronsim import _C

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


def _dropout(p=0.5, n=37):
    return F.dropout(torch.ones(n, device="neuron"), p=p, training=True)


def _state(seed, offset=0):
    raw = seed.to_bytes(8, "little") + offset.to_bytes(8, "little")
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8)


@pytest.mark.parametrize("name", list(DRAWS) + ["dropout"])
def test_manual_seed_makes_draws_reproducible(name):
    draw = _dropout if name == "dropout" else DRAWS[name]
    torch.manual_seed(1234)
    a = draw().cpu()
    a2 = draw().cpu()
    torch.manual_seed(1234)
    b = draw().cpu()
    b2 = draw().cpu()
    assert torch.equal(a, b) and torch.equal(a2, b2)
    assert not torch.equal(a, a2)  # the stream moves on
    torch.manual_seed(4321)
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
def test_every_random_op_draws_the_cpu_stream_or_a_given_generator(name):
    # Ops without a native kernel too: seeded by torch.manual_seed, and a neuron Generator
    # object gives its own reproducible stream.
    draw = OTHER_DRAWS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(99)
        a = draw().cpu()
        torch.manual_seed(99)
        b = draw().cpu()
        assert torch.equal(a, b), "not reproducible with torch.manual_seed"
        g = torch.Generator(device="neuron")
        g.manual_seed(5)
        c = draw(g).cpu()
        g.manual_seed(5)
        assert torch.equal(draw(g).cpu(), c)
        assert g.get_offset() > 0  # the generator's stream moved on


CPU_SAME = {
    "rand": lambda d, g: torch.rand(4, 37, device=d, generator=g),
    "randn": lambda d, g: torch.randn(4, 4, device=d, generator=g),
    "randint": lambda d, g: torch.randint(0, 1000, (37,), device=d, generator=g),
    "randint_int32": lambda d, g: torch.randint(
        -5, 9, (37,), device=d, generator=g, dtype=torch.int32
    ),
    "normal_": lambda d, g: torch.empty(37, device=d).normal_(2.0, 3.0, generator=g),
    "uniform_": lambda d, g: torch.empty(37, device=d).uniform_(-2, 5, generator=g),
    "bernoulli_": lambda d, g: torch.empty(37, device=d).bernoulli_(0.3, generator=g),
    "bernoulli_p": lambda d, g: torch.bernoulli(torch.full((37,), 0.4, device=d), generator=g),
    "randn_bf16": lambda d, g: torch.randn(37, device=d, dtype=torch.bfloat16, generator=g),
    "randperm": lambda d, g: torch.randperm(50, device=d, generator=g),
    "multinomial": lambda d, g: torch.multinomial(
        torch.arange(1.0, 51.0, device=d), 10, generator=g
    ),
    "multinomial_rows_replacement": lambda d, g: torch.multinomial(
        torch.arange(1.0, 61.0, device=d).reshape(3, 20), 7, True, generator=g
    ),
    "multinomial_rows_one": lambda d, g: torch.multinomial(
        torch.arange(1.0, 61.0, device=d).reshape(3, 20), 1, generator=g
    ),
    "normal_tensor": lambda d, g: torch.normal(torch.zeros(50, device=d), 1.0, generator=g),
    "exponential_": lambda d, g: torch.empty(50, device=d).exponential_(generator=g),
    "dropout": lambda d, g: F.dropout(torch.ones(64, device=d), p=0.4, training=True),
}


@pytest.mark.parametrize("name", list(CPU_SAME))
def test_seeded_draws_equal_the_cpu(name):
    draw = CPU_SAME[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        dev = [draw("neuron", None).cpu() for _ in range(3)]
        torch.manual_seed(0)
        cpu = [draw("cpu", None) for _ in range(3)]
        assert all(torch.equal(a, b) for a, b in zip(dev, cpu, strict=True))


@pytest.mark.parametrize("name", list(CPU_SAME))
def test_interleaved_cpu_and_neuron_draws_are_the_single_cpu_stream(name):
    # TorchNeuron's random ops run on the CPU: a program alternating CPU and neuron draws takes
    # them from one stream, the one a CPU-only program draws from.
    draw = CPU_SAME[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(3)
        mixed = [draw(d, None).cpu() for d in ("cpu", "neuron", "neuron", "cpu", "neuron")]
        torch.manual_seed(3)
        cpu = [draw("cpu", None) for _ in range(5)]
    assert all(torch.equal(a, b) for a, b in zip(mixed, cpu, strict=True))


def test_must_show_randn_4x4():
    torch.manual_seed(0)
    a = torch.randn(4, 4, device="neuron").cpu()
    torch.manual_seed(0)
    assert torch.equal(a, torch.randn(4, 4))


def test_dropout_training_step_matches_cpu_bit_for_bit():
    def step(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Linear(16, 32), torch.nn.Dropout(0.3), torch.nn.ReLU(), torch.nn.Linear(32, 4)
        )
        x = torch.randn(8, 16)
        model, x = model.to(device), x.to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        # The device's generator is its own (as CUDA's): the dropout mask is the first draw of
        # the CPU stream on both devices.
        torch.manual_seed(1)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        return [loss.detach().cpu()] + [p.detach().cpu() for p in model.parameters()]

    for a, b in zip(step("neuron"), step("cpu"), strict=True):
        assert torch.equal(a, b)


def test_torch_manual_seed_seeds_the_device():
    torch.manual_seed(77)
    assert torch.neuron.initial_seed() == 77
    assert torch.equal(torch.neuron.get_rng_state(), _state(77))
    assert torch.equal(torch.neuron.get_rng_state("neuron:1"), _state(77))


def test_rng_state_is_torchneurons_philox_state():
    torch.neuron.manual_seed(5)
    s = torch.neuron.get_rng_state()
    assert s.dtype == torch.uint8 and s.shape == (16,) and s.device.type == "cpu"
    assert torch.equal(s, _state(5))
    torch.neuron.set_rng_state(_state(9, 12))
    assert torch.neuron.initial_seed() == 9
    assert torch.equal(torch.neuron.get_rng_state(), _state(9, 12))
    torch.neuron.set_rng_state(s)
    assert torch.equal(torch.neuron.get_rng_state(), s)
    # 8 bytes: a seed alone, as TorchNeuron accepts.
    torch.neuron.set_rng_state(_state(21)[:8].clone())
    assert torch.equal(torch.neuron.get_rng_state(), _state(21))


def test_neuron_rng_calls_leave_the_cpu_stream_alone():
    # TorchNeuron's test_neuron_rng_independent_from_cpu.
    torch.manual_seed(42)
    cpu_only = [torch.randn(5) for _ in range(3)]
    torch.manual_seed(42)
    torch.neuron.manual_seed(123)
    torch.neuron.get_rng_state()
    torch.neuron.seed()
    torch.neuron.initial_seed()
    torch.neuron.set_rng_state(_state(7, 3))
    with_neuron = [torch.randn(5) for _ in range(3)]
    assert all(torch.equal(a, b) for a, b in zip(cpu_only, with_neuron, strict=True))


def test_set_rng_state_rejects_a_bad_state():
    with pytest.raises(RuntimeError, match="wrong size"):
        torch.neuron.set_rng_state(torch.zeros(5056, dtype=torch.uint8))


def test_get_and_set_rng_state_all():
    torch.neuron.manual_seed_all(11)
    states = torch.neuron.get_rng_state_all()
    assert len(states) == 2 and all(torch.equal(s, _state(11)) for s in states)
    torch.neuron.set_rng_state_all([_state(1, 2), _state(3, 4)])
    assert torch.equal(torch.neuron.get_rng_state("neuron:1"), _state(3, 4))
    torch.neuron.set_rng_state_all(states)
    assert all(torch.equal(s, _state(11)) for s in torch.neuron.get_rng_state_all())


def test_philox_region_draws_the_generators_stream():
    # DTensor's tracker opens a region (python/neuronsim/_dtensor_rng.py): random ops draw the
    # default generator's Philox stream at its offset, and the offset advances (rand(8) covers
    # Philox blocks 0-1; rand(4) twice draws block 0 then block 1).
    torch.neuron.set_rng_state(_state(9))
    _C._set_philox_region(0, True)
    try:
        whole = torch.rand(8, device="neuron").cpu()
        assert torch.neuron.get_rng_state()[8:].view(torch.int64).item() == 2
        torch.neuron.set_rng_state(_state(9))
        parts = torch.cat(
            [torch.rand(4, device="neuron").cpu(), torch.rand(4, device="neuron").cpu()]
        )
    finally:
        _C._set_philox_region(0, False)
    assert torch.equal(whole, parts)
    # Outside the region: the CPU stream again.
    saved = torch.get_rng_state()
    after = torch.rand(4, device="neuron").cpu()
    torch.set_rng_state(saved)
    assert torch.equal(after, torch.rand(4))


def test_cores_draw_from_the_one_cpu_stream():
    torch.manual_seed(21)
    a = torch.rand(6, device="neuron:0").cpu()
    b = torch.rand(6, device="neuron:1").cpu()
    torch.manual_seed(21)
    assert torch.equal(a, torch.rand(6)) and torch.equal(b, torch.rand(6))


def test_generator_objects():
    g = torch.Generator(device="neuron")
    assert g.device == torch.device("neuron", 0)
    g.manual_seed(42)
    assert g.initial_seed() == 42
    torch.neuron.manual_seed(1)
    default_before = torch.neuron.get_rng_state()
    cpu_before = torch.get_rng_state()
    a = {name: draw(g).cpu() for name, draw in DRAWS.items()}
    # Drawing from g leaves the default generator and the CPU stream alone.
    assert torch.equal(torch.neuron.get_rng_state(), default_before)
    assert torch.equal(torch.get_rng_state(), cpu_before)
    g.manual_seed(42)
    b = {name: draw(g).cpu() for name, draw in DRAWS.items()}
    assert all(torch.equal(a[k], b[k]) for k in a)
    state = g.get_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    assert state[8:].view(torch.int64).item() == g.get_offset() > 0
    x = torch.rand(9, device="neuron", generator=g).cpu()
    g.set_state(state)
    assert torch.equal(torch.rand(9, device="neuron", generator=g).cpu(), x)
    g1 = torch.Generator(device="neuron:1")
    assert g1.device == torch.device("neuron", 1)
    g1.manual_seed(3)
    assert torch.rand(4, device="neuron:1", generator=g1).is_neuron


def test_generator_objects_draw_the_same_in_fast_and_isa_mode():
    # The Philox stream is the rng instruction's: ISA mode computes the same values.
    g = torch.Generator(device="neuron")
    g.manual_seed(8)
    fast = torch.rand(300, device="neuron", generator=g).cpu()
    g.manual_seed(8)
    _C._set_isa_mode(True)
    try:
        isa = torch.rand(300, device="neuron", generator=g).cpu()
    finally:
        _C._set_isa_mode(False)
    assert torch.equal(fast, isa)


def test_random_ops_are_native():
    torch.manual_seed(0)
    neuronsim.clear_op_tracking()
    for draw in DRAWS.values():
        draw()
    _dropout()
    assert neuronsim.get_fallback_ops() == set()
    assert {
        "aten::rand.generator",  # generator= passed, even as None
        "aten::randn.generator",
        "aten::randint.low_generator",
        "aten::uniform_",
        "aten::normal_",
        "aten::random_.from",
        "aten::bernoulli",
        "aten::bernoulli_.float",
        "aten::dropout",
        "aten::native_dropout",
    } <= neuronsim.get_executed_ops()


def test_multinomial_and_exponential_are_native():
    probs = torch.rand(4, 300, device="neuron").softmax(-1)
    neuronsim.clear_op_tracking()
    torch.multinomial(probs, 1)  # exponential draws, p / q, argmax (ATen's Gumbel-max path)
    torch.multinomial(probs, 5)  # ... topk
    torch.multinomial(probs, 5, replacement=True)  # one Gumbel-max pass per sample
    torch.empty(10, device="neuron").exponential_(3.0)
    assert neuronsim.get_fallback_ops() == set()
    assert {"aten::multinomial", "aten::exponential_"} <= neuronsim.get_executed_ops()


@pytest.mark.parametrize(
    "bad, message",
    [
        (lambda: torch.multinomial(torch.zeros(3, device="neuron"), 1), "sum of probabilities"),
        (lambda: torch.multinomial(torch.tensor([-1.0, 2.0], device="neuron"), 1), "element < 0"),
        (lambda: torch.multinomial(torch.ones(2, device="neuron"), 3), "without replacement"),
        (lambda: torch.empty(3, device="neuron").exponential_(-1.0), "lambda > 0"),
    ],
)
def test_multinomial_and_exponential_bad_input(bad, message):
    with pytest.raises(RuntimeError, match=message):
        bad()


def test_isa_mode_multinomial_and_exponential_draw_from_the_device_stream():
    from neuronsim import _C

    _C._set_isa_mode(True)
    try:
        torch.manual_seed(7)
        e = torch.empty(100_000, device="neuron").exponential_(2.0).cpu()
        p = torch.tensor([0.1, 0.2, 0.7], device="neuron")
        with_rep = torch.multinomial(p.expand(4000, 3).contiguous(), 3, True).cpu()
        one = torch.multinomial(p.expand(10_000, 3).contiguous(), 1).cpu()
        perm = torch.multinomial(p.expand(500, 3).contiguous(), 3).cpu()
    finally:
        _C._set_isa_mode(False)
    assert e.min() >= 0 and abs(e.mean().item() - 0.5) < 0.01
    want = torch.tensor([0.1, 0.2, 0.7])
    for s in (with_rep, one):
        freq = torch.bincount(s.flatten(), minlength=3) / s.numel()
        assert torch.allclose(freq, want, atol=0.02), freq
    assert bool((perm.sort(1).values == torch.arange(3)).all())


# ---------------------------------------------------------------------------------------------
# Statistics.

N = 100_000


def test_normal_statistics():
    torch.manual_seed(2024)
    z = torch.randn(N, device="neuron").cpu().double()
    assert abs(z.mean().item()) < 0.02
    assert abs(z.std().item() - 1) < 0.02
    assert abs((z.abs() < 1).double().mean().item() - 0.6827) < 0.01
    w = torch.empty(N, device="neuron").normal_(3.0, 0.5).cpu().double()
    assert abs(w.mean().item() - 3.0) < 0.01
    assert abs(w.std().item() - 0.5) < 0.01


def test_uniform_statistics():
    torch.manual_seed(2025)
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
    torch.manual_seed(2026)
    r = torch.randint(3, 13, (N,), device="neuron").cpu()
    assert r.dtype == torch.int64
    assert r.min().item() == 3 and r.max().item() == 12
    counts = torch.bincount(r - 3, minlength=10)
    assert (counts - N / 10).abs().max().item() < 0.05 * N / 10


def test_bernoulli_rate():
    torch.manual_seed(2027)
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
    torch.manual_seed(2028)
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
    torch.manual_seed(8)
    a = m(x).cpu()
    torch.manual_seed(8)
    assert torch.equal(m(x).cpu(), a)


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_recomputes_the_forwards_dropout_mask(reentrant):
    """torch.utils.checkpoint restores the device RNG state before recomputing, so the backward
    sees the forward's dropout mask: gradients equal the uncheckpointed run's (they did not:
    checkpoint saves the device state only when the device module's `_initialized` is true)."""
    from torch.utils.checkpoint import checkpoint

    def block(x, w):
        return F.dropout(torch.tanh(x @ w), 0.5) * x.sum()

    def grads(use_checkpoint):
        torch.manual_seed(3)
        x = torch.randn(6, 8, device="neuron", requires_grad=True)
        w = torch.randn(8, 8, device="neuron", requires_grad=True)
        torch.manual_seed(11)
        if use_checkpoint:
            y = checkpoint(block, x, w, use_reentrant=reentrant)
        else:
            y = block(x, w)
        y.pow(2).sum().backward()
        return y.detach().cpu(), x.grad.cpu(), w.grad.cpu()

    checkpointed = grads(True)
    assert torch.neuron._initialized is True
    for a, b in zip(checkpointed, grads(False), strict=True):
        assert torch.equal(a, b)
