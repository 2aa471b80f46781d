"""Integration points FSDP2, DTensor, AMP and the HF Trainer rely on."""

import torch


def test_storage_resize_frees_and_restores_like_fsdp2(neuron):
    p = torch.arange(1024, dtype=torch.float32, device=neuron)
    storage = p.untyped_storage()
    nbytes = storage.nbytes()
    storage.resize_(0)
    assert storage.nbytes() == 0
    storage.resize_(nbytes)
    assert storage.nbytes() == nbytes
    p.copy_(torch.ones(1024))
    assert torch.equal(p.cpu(), torch.ones(1024))


def test_storage_resize_keeps_the_common_prefix(neuron):
    t = torch.arange(16, dtype=torch.float32, device=neuron)
    t.untyped_storage().resize_(32 * 4)
    assert torch.equal(t.cpu(), torch.arange(16, dtype=torch.float32))


def test_record_stream_is_accepted(neuron):
    s = torch.neuron.Stream()
    t = torch.ones(8, device=neuron)
    t.record_stream(s)
    assert t.sum().item() == 8


def test_generator_state_layout_matches_dtensor_tracker():
    torch.neuron.manual_seed(7)
    state = torch.neuron.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    seed = state[-16:-8].view(torch.int64).item()
    offset = state[-8:].view(torch.int64).item()
    assert (seed, offset) == (7, 0)
    torch.rand(10, device="neuron")  # consumes ceil(10 / 4) = 3 Philox blocks
    assert torch.neuron.get_rng_state()[-8:].view(torch.int64).item() == 3
    # DTensor moves the offset by writing the last 8 bytes.
    new = state.clone()
    new[-8:] = torch.tensor([100], dtype=torch.int64).view(torch.uint8)
    torch.neuron.set_rng_state(new)
    a = torch.rand(4, device="neuron").cpu()
    torch.neuron.set_rng_state(new)
    b = torch.rand(4, device="neuron").cpu()
    assert torch.equal(a, b)


def test_autocast_lowers_matmul_and_keeps_softmax_fp32(neuron):
    a = torch.randn(16, 16, device=neuron)
    with torch.autocast("neuron", dtype=torch.bfloat16):
        c = a @ a
        s = c.softmax(-1)
    assert c.dtype == torch.bfloat16
    assert s.dtype == torch.float32


def test_grad_scaler_step(neuron):
    model = torch.nn.Linear(8, 8).to(neuron)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("neuron")
    loss = model(torch.randn(4, 8, device=neuron)).sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert all(torch.isfinite(p).all() for p in model.parameters())
