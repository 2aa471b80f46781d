"""nn.SyncBatchNorm's ops on the device: PyTorch implements batch_norm_stats,
batch_norm_gather_stats_with_counts, batch_norm_elemt, batch_norm_backward_reduce and
batch_norm_backward_elemt for CUDA only, and nn.SyncBatchNorm calls them for the PrivateUse1
device too (it failed with "Could not run 'aten::batch_norm_stats' with arguments from the 'CPU'
backend"). Each op against the CUDA formulas written in plain CPU ops; the autograd function on
a one-rank group against F.batch_norm; two ranks: tests/python/distributed/
sync_batch_norm_check.py."""

import neuronsim
import pytest
import torch
import torch.nn.functional as F
from neuronsim import _C

DIMS = (0, 2, 3)


@pytest.fixture(params=[False, True], ids=["fast", "isa"])
def mode(request):
    """Fast mode (host values by CUDA's formulas) and ISA mode (the programs' values)."""
    _C._set_isa_mode(request.param)
    try:
        yield request.param
    finally:
        _C._set_isa_mode(False)


def _x(dtype=torch.float32, shape=(4, 5, 6, 7), seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _close(got, want, tol=1e-5):
    got = got.cpu()
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    assert torch.allclose(got.double(), want.double(), rtol=tol, atol=tol), (
        (got.double() - want.double()).abs().max()
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_stats_elemt_and_backward_ops_follow_cudas_formulas(dtype, mode):
    neuronsim.clear_op_tracking()
    x = _x(dtype)
    xf = x.float()
    w, b = torch.randn(5), torch.randn(5)
    eps = 1e-3
    mean, invstd = torch.batch_norm_stats(x.to("neuron"), eps)
    var_ref, mean_ref = torch.var_mean(xf, DIMS, correction=0)
    _close(mean, mean_ref)  # fp32 statistics for bf16 data, as CUDA's
    _close(invstd, 1 / torch.sqrt(var_ref + eps))

    y = torch.batch_norm_elemt(x.to("neuron"), w.to("neuron"), b.to("neuron"), mean, invstd, eps)
    c = (1, 5, 1, 1)
    y_ref = (xf - mean_ref.view(c)) / torch.sqrt(var_ref.view(c) + eps) * w.view(c) + b.view(c)
    _close(y, y_ref.to(dtype), 1e-5 if dtype == torch.float32 else 2e-2)

    g = _x(dtype, seed=1)
    gf = g.float()
    sum_dy, sum_dy_xmu, gw, gb = torch.batch_norm_backward_reduce(
        g.to("neuron"), x.to("neuron"), mean, invstd, w.to("neuron"), True, True, True
    )
    xmu = xf - mean_ref.view(c)
    _close(sum_dy, gf.sum(DIMS), 1e-4)
    _close(sum_dy_xmu, (gf * xmu).sum(DIMS), 1e-4)
    _close(gw, (gf * xmu).sum(DIMS) / torch.sqrt(var_ref + eps), 1e-4)
    _close(gb, gf.sum(DIMS), 1e-4)
    none = torch.batch_norm_backward_reduce(
        g.to("neuron"), x.to("neuron"), mean, invstd, None, True, False, False
    )
    assert none[2] is None and none[3] is None

    counts = torch.tensor([x.numel() // 5], dtype=torch.int32)
    gi = torch.batch_norm_backward_elemt(
        g.to("neuron"),
        x.to("neuron"),
        mean,
        invstd,
        w.to("neuron"),
        sum_dy,
        sum_dy_xmu,
        counts.to("neuron"),
    )
    # The batch norm input gradient, computed by autograd on the CPU.
    xr = xf.clone().requires_grad_()
    F.batch_norm(xr, None, None, w, None, training=True, eps=eps).backward(gf)
    _close(gi, xr.grad.to(dtype), 1e-4 if dtype == torch.float32 else 3e-2)
    assert not neuronsim.get_fallback_ops()
    if mode:  # the host only sizes the outputs (no Meta kernels); the programs write the values
        host = dict(_C._isa_host_ops())
        assert host and all("sized by the CPU kernel" in why for why in host.values()), host
    ran = neuronsim.get_executed_ops()
    for op in (
        "batch_norm_stats",
        "batch_norm_elemt",
        "batch_norm_backward_reduce",
        "batch_norm_backward_elemt",
    ):
        assert any(op in name for name in ran), (op, ran)


def test_gather_stats_with_counts_combines_ranks_and_updates_running_stats(mode):
    # Three "ranks" of 2, 5 and 1 images: their statistics combine into the whole batch's.
    parts = [_x(shape=(n, 4, 3, 3), seed=n) for n in (2, 5, 1)]
    whole = torch.cat(parts)
    eps, momentum = 1e-5, 0.3
    stats = [torch.batch_norm_stats(p.to("neuron"), eps) for p in parts]
    mean_all = torch.stack([m for m, _ in stats])
    invstd_all = torch.stack([i for _, i in stats])
    counts = torch.tensor([p.numel() // 4 for p in parts], dtype=torch.float32, device="neuron")
    rm, rv = torch.full((4,), 0.5, device="neuron"), torch.full((4,), 2.0, device="neuron")
    mean, invstd = torch.batch_norm_gather_stats_with_counts(
        whole.to("neuron"), mean_all, invstd_all, rm, rv, momentum, eps, counts
    )
    var_b, mean_ref = torch.var_mean(whole, DIMS, correction=0)
    var_u = torch.var(whole, DIMS, correction=1)
    _close(mean, mean_ref)
    _close(invstd, 1 / torch.sqrt(var_b + eps), 1e-4)
    _close(rm, 0.5 * (1 - momentum) + momentum * mean_ref)
    _close(rv, 2.0 * (1 - momentum) + momentum * var_u, 1e-4)


def test_out_overloads_write_their_outputs():
    x = _x()
    mean, invstd = torch.empty(0, device="neuron"), torch.empty(0, device="neuron")
    r = torch.ops.aten.batch_norm_stats.out(x.to("neuron"), 1e-5, out0=mean, out1=invstd)
    assert r[0] is mean and r[1] is invstd
    _close(mean, x.mean(DIMS))
    out = torch.empty(x.shape, device="neuron")
    torch.ops.aten.batch_norm_elemt.out(x.to("neuron"), None, None, mean, invstd, 1e-5, out=out)
    _close(out, F.batch_norm(x, None, None, training=True, eps=1e-5))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: torch.batch_norm_stats(torch.ones(5, device="neuron"), 1e-5), "at least 2 dims"),
        (
            lambda: torch.batch_norm_elemt(
                torch.ones(2, 3, device="neuron"),
                None,
                None,
                torch.zeros(4, device="neuron"),
                torch.ones(3, device="neuron"),
                1e-5,
            ),
            "mean must have one value per channel",
        ),
        (
            lambda: torch.batch_norm_stats(torch.ones(2, 3, dtype=torch.int32, device="neuron"), 0),
            "must be a floating tensor",
        ),
    ],
)
def test_bad_input_names_the_problem(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


def test_sync_batch_norm_function_on_a_one_rank_group_matches_batch_norm():
    import torch.distributed as dist
    from torch.nn.modules._functions import SyncBatchNorm

    dist.init_process_group("neuron", store=dist.HashStore(), rank=0, world_size=1)
    try:
        x = _x(shape=(3, 4, 5, 5))
        w, b = torch.randn(4), torch.randn(4)
        go = _x(shape=(3, 4, 5, 5), seed=9)
        rm_c, rv_c = torch.zeros(4), torch.ones(4)
        xc, wc, bc = (t.clone().requires_grad_() for t in (x, w, b))
        F.batch_norm(xc, rm_c, rv_c, wc, bc, training=True, momentum=0.1, eps=1e-5).backward(go)
        xd, wd, bd = (t.to("neuron").requires_grad_() for t in (x, w, b))
        rm_d, rv_d = torch.zeros(4, device="neuron"), torch.ones(4, device="neuron")
        y = SyncBatchNorm.apply(xd, wd, bd, rm_d, rv_d, 1e-5, 0.1, dist.group.WORLD, 1)
        y.backward(go.to("neuron"))
        _close(y.detach(), F.batch_norm(x, None, None, w, b, training=True, eps=1e-5), 1e-4)
        for got, want in (
            (xd.grad, xc.grad),
            (wd.grad, wc.grad),
            (bd.grad, bc.grad),
            (rm_d, rm_c),
            (rv_d, rv_c),
        ):
            _close(got, want, 1e-4)
    finally:
        dist.destroy_process_group()
