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


def test_dtensor_random_ops_use_offset_regions(tmp_path):
    # DTensor's OffsetBasedRNGTracker sees a 16-byte (seed, offset) state on neuron devices
    # (neuronsim/_dtensor_rng.py); its random ops are reproducible and advance the offset, and
    # the default stream outside them stays the CPU's.
    import torch.distributed as dist
    import torch.distributed.tensor._random as dtensor_random
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard

    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        mesh = init_device_mesh("neuron", (1,))
        draws = []
        for _ in range(2):
            torch.manual_seed(0)
            dtensor_random.manual_seed(0, mesh)
            x = DTensor.from_local(torch.empty(8, 4, device="neuron"), mesh, [Shard(0)])
            x.uniform_()
            y = torch.nn.functional.dropout(x, 0.5)
            assert torch.neuron._generator().get_offset() > 0
            draws.append((x.to_local().cpu(), y.to_local().cpu(), torch.randn(3, device="neuron")))
        assert all(torch.equal(a, b) for a, b in zip(*draws, strict=True))
        torch.manual_seed(0)
        assert torch.equal(draws[0][2].cpu(), torch.randn(3))
    finally:
        dtensor_random._rng_tracker = None
        dist.destroy_process_group()


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
