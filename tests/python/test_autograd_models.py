"""Training on the neuron device gives the same losses, gradients and parameters as on the CPU.

Each test builds a model on the CPU under a fixed seed, deep-copies it to the device, and runs
the same steps on both. Tolerances: in the default (fast) mode the device computes every native
op with ATen's CPU kernel on a zero-copy view of simulated HBM, so float32 forward/backward
results of the same ATen ops are bit-identical. The comparisons allow rtol=1e-5/atol=1e-6
(float32) because two things legitimately take other paths on the device: ``torch.optim``
defaults to its ``foreach`` implementation for "neuron" (a foreach-supported device) and to the
per-tensor loop on the CPU, which may order the same arithmetic differently; and scaled
dot-product attention dispatches to a fused flash kernel on the CPU but to the math decomposition
on the device (a few ulps: gradients within 5e-7 relative here; the transformer tests therefore
run the CPU reference on the math path too). bfloat16 comparisons use the bfloat16 defaults of
``torch.testing.assert_close``.
"""

from __future__ import annotations

import copy

import neuronsim
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.testing import assert_close

F32 = {"rtol": 1e-5, "atol": 1e-6}


def _assert_params_close(a: nn.Module, b: nn.Module, grads: bool = True, **tol) -> None:
    tol = tol or F32
    pa, pb = dict(a.named_parameters()), dict(b.named_parameters())
    assert pa.keys() == pb.keys()
    for name in pa:
        assert_close(
            pb[name].detach().cpu(), pa[name].detach(), msg=lambda m, n=name: f"{n}: {m}", **tol
        )
        if grads:
            ga, gb = pa[name].grad, pb[name].grad
            assert (ga is None) == (gb is None), name
            if ga is not None:
                assert gb.device.type == "neuron", name
                assert_close(gb.cpu(), ga, msg=lambda m, n=name: f"grad {n}: {m}", **tol)


class MLP(nn.Module):
    def __init__(self, d_in=16, hidden=32, d_out=4):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.Tanh(),
            nn.Linear(hidden, d_out),
        )

    def forward(self, x):
        return self.net(x)


class TinyTransformer(nn.Module):
    """Embedding + one pre-norm block (causal self-attention, GELU MLP) + LM head."""

    def __init__(self, vocab=64, d=32, heads=4, max_len=16, sdpa=False):
        super().__init__()
        self.vocab, self.heads, self.sdpa = vocab, heads, sdpa
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(max_len, d) * 0.02)
        self.ln1 = nn.LayerNorm(d)
        if sdpa:
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
        else:
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.lnf = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        b, t = ids.shape
        x = self.emb(ids) + self.pos[:t]
        h = self.ln1(x)
        if self.sdpa:
            q, k, v = self.qkv(h).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            a = self.proj(a.transpose(1, 2).reshape(b, t, -1))
        else:
            mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=ids.device), 1)
            a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
        x = x + a
        x = x + self.mlp(self.ln2(x))
        return self.head(self.lnf(x))

    def loss(self, ids, targets):
        logits = self(ids)
        return F.cross_entropy(logits.reshape(-1, self.vocab), targets.reshape(-1))


def _pair(model: nn.Module):
    return model, copy.deepcopy(model).to("neuron")


@pytest.mark.parametrize("opt_name", ["sgd", "adamw"])
def test_mlp_training_matches_cpu(opt_name):
    torch.manual_seed(0)
    cpu, dev = _pair(MLP())
    make = {
        "sgd": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-3),
        "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.01),
    }[opt_name]
    opt_c, opt_d = make(cpu.parameters()), make(dev.parameters())
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    xd, yd = x.to("neuron"), y.to("neuron")
    losses_c, losses_d = [], []
    for _ in range(5):
        for model, opt, a, b, losses in (
            (cpu, opt_c, x, y, losses_c),
            (dev, opt_d, xd, yd, losses_d),
        ):
            opt.zero_grad()
            loss = F.mse_loss(model(a), b)
            loss.backward()
            losses.append(loss.item())
            opt.step()
    assert losses_c[-1] < losses_c[0]  # it trains
    assert_close(losses_d, losses_c, **F32)
    _assert_params_close(cpu, dev)
    for p in dev.parameters():
        assert p.device.type == "neuron"
    # Optimizer state lives on the device too.
    state = next(iter(opt_d.state.values()))
    for v in state.values():
        if isinstance(v, torch.Tensor) and v.dim() > 0:
            assert v.device.type == "neuron"


def test_optimizer_foreach_path_matches_single_tensor_path():
    """The device defaults to foreach; forcing the same path on the CPU agrees tightly."""
    torch.manual_seed(1)
    cpu, dev = _pair(MLP())
    opt_c = torch.optim.AdamW(cpu.parameters(), lr=1e-2, foreach=True)
    opt_d = torch.optim.AdamW(dev.parameters(), lr=1e-2)
    x = torch.randn(8, 16)
    for _ in range(3):
        for model, opt, a in ((cpu, opt_c, x), (dev, opt_d, x.to("neuron"))):
            opt.zero_grad()
            model(a).square().mean().backward()
            opt.step()
    _assert_params_close(cpu, dev, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("opt_name", ["sgd", "adamw"])
@pytest.mark.parametrize("sdpa", [False, True], ids=["mha", "sdpa"])
def test_transformer_block_training_matches_cpu(sdpa, opt_name):
    """Three training steps of the block: losses, gradients (every step) and parameters match.

    Attention dispatches by device: the CPU picks the fused
    _scaled_dot_product_flash_attention_for_cpu, the device the math decomposition (_safe_softmax,
    bmm). Those agree only to rounding, and Adam turns rounding noise in near-zero gradients
    (the key-projection bias has a mathematically zero gradient: softmax is shift-invariant)
    into lr-sized updates of arbitrary sign. So the CPU reference runs the same math path
    (sdpa_kernel(MATH)); then the device matches it bit for bit in practice (measured), and the
    F32 tolerances only leave room for legitimate reordering.
    """
    torch.manual_seed(0)
    cpu, dev = _pair(TinyTransformer(sdpa=sdpa))
    make = {
        "sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
        "adamw": lambda p: torch.optim.AdamW(p, lr=3e-3),
    }[opt_name]
    opt_c, opt_d = make(cpu.parameters()), make(dev.parameters())
    ids, tgt = torch.randint(0, 64, (2, 12)), torch.randint(0, 64, (2, 12))
    ids_d, tgt_d = ids.to("neuron"), tgt.to("neuron")
    losses_c, losses_d = [], []
    for step in range(3):
        for model, opt, a, b, losses in (
            (cpu, opt_c, ids, tgt, losses_c),
            (dev, opt_d, ids_d, tgt_d, losses_d),
        ):
            opt.zero_grad()
            with sdpa_kernel(SDPBackend.MATH):
                loss = model.loss(a, b)
            loss.backward()
            losses.append(loss.item())
        for (name, pc), pd in zip(cpu.named_parameters(), dev.parameters(), strict=True):
            assert_close(
                pd.grad.cpu(),
                pc.grad,
                **F32,
                msg=lambda m, s=step, n=name: f"step {s} grad {n}: {m}",
            )
        opt_c.step()
        opt_d.step()
    assert losses_c[-1] < losses_c[0]
    assert_close(losses_d, losses_c, **F32)
    _assert_params_close(cpu, dev, grads=False)


def test_transformer_encoder_layer_trains_like_cpu_with_simulated_step_time():
    """nn.TransformerEncoderLayer + AdamW, four steps: the loss curve matches the CPU's and every
    step costs simulated time (printed, so `pytest -s` shows it)."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(
        d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True
    )
    cpu, dev = _pair(nn.Sequential(layer, nn.Linear(32, 10)))
    opt_c = torch.optim.AdamW(cpu.parameters(), lr=3e-3)
    opt_d = torch.optim.AdamW(dev.parameters(), lr=3e-3)
    x, y = torch.randn(4, 12, 32), torch.randint(0, 10, (4, 12))
    x_d, y_d = x.to("neuron"), y.to("neuron")
    losses_c, losses_d, step_ns = [], [], []
    for _ in range(4):
        for model, opt, a, b, losses in (
            (cpu, opt_c, x, y, losses_c),
            (dev, opt_d, x_d, y_d, losses_d),
        ):
            t0 = neuronsim.simulated_time_ns()
            opt.zero_grad()
            with sdpa_kernel(SDPBackend.MATH):
                loss = F.cross_entropy(model(a).flatten(0, 1), b.flatten())
            loss.backward()
            opt.step()
            losses.append(loss.item())  # synchronizes the device
            if model is dev:
                step_ns.append(neuronsim.simulated_time_ns() - t0)
    print("simulated us per step:", [round(t / 1e3, 1) for t in step_ns])
    assert losses_c[-1] < losses_c[0]
    assert_close(losses_d, losses_c, rtol=1e-5, atol=1e-5)
    assert all(t > 0 for t in step_ns)
    assert abs(step_ns[2] - step_ns[3]) < 1e-3  # same work, same simulated time


def test_transformer_step_runs_without_fallback():
    """Forward, backward and AdamW step of the block use only native ops."""
    torch.manual_seed(0)
    model = TinyTransformer().to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 64, (2, 8), device="neuron")
    neuronsim.clear_op_tracking()
    model.loss(ids, ids).backward()
    opt.step()
    assert neuronsim.get_fallback_ops() == set()
    executed = neuronsim.get_executed_ops()
    for op in (
        "aten::addmm",
        "aten::bmm",
        "aten::native_layer_norm",
        "aten::native_layer_norm_backward",
        "aten::_softmax",
        "aten::gelu",
        "aten::gelu_backward",
        "aten::embedding_dense_backward",
        "aten::nll_loss_forward",
        "aten::nll_loss_backward",
        "aten::_log_softmax_backward_data",
    ):
        assert op in executed, (op, sorted(executed))
    report = neuronsim.op_report()
    assert all(c["fallback"] == 0 for c in report.values()), report


def test_sdpa_step_runs_without_fallback():
    torch.manual_seed(0)
    model = TinyTransformer(sdpa=True).to("neuron")
    ids = torch.randint(0, 64, (2, 8), device="neuron")
    neuronsim.clear_op_tracking()
    model.loss(ids, ids).backward()
    assert neuronsim.get_fallback_ops() == set()


def test_bf16_forward_matches_cpu():
    torch.manual_seed(0)
    cpu = TinyTransformer().to(torch.bfloat16).eval()
    dev = copy.deepcopy(cpu).to("neuron")
    ids = torch.randint(0, 64, (2, 12))
    with torch.no_grad():
        out_c = cpu(ids)
        out_d = dev(ids.to("neuron"))
    assert out_d.dtype == torch.bfloat16 and out_d.device.type == "neuron"
    # Within a bf16 step of values of order 1: nn.MultiheadAttention's eval fast path runs on
    # the device (its flash sdpa rounds once, the CPU's kernels at other points).
    assert_close(out_d.cpu(), out_c, rtol=1.6e-2, atol=8e-3)


def test_bf16_mlp_backward_matches_cpu():
    torch.manual_seed(0)
    cpu = MLP().to(torch.bfloat16)
    dev = copy.deepcopy(cpu).to("neuron")
    x = torch.randn(8, 16, dtype=torch.bfloat16)
    cpu(x).float().square().mean().backward()
    dev(x.to("neuron")).float().square().mean().backward()
    _assert_params_close(cpu, dev, rtol=1.6e-2, atol=1e-5)


def test_rmsnorm_forward_backward_matches_cpu():
    torch.manual_seed(0)
    cpu = nn.RMSNorm(24, eps=1e-6)
    with torch.no_grad():
        cpu.weight.uniform_(0.5, 1.5)
    dev = copy.deepcopy(cpu).to("neuron")
    x = torch.randn(3, 5, 24) * 3
    xc = x.clone().requires_grad_()
    xd = x.to("neuron").requires_grad_()
    g = torch.randn(3, 5, 24)
    neuronsim.clear_op_tracking()
    yd = dev(xd)
    yd.backward(g.to("neuron"))
    yc = cpu(xc)
    yc.backward(g)
    assert_close(yd.detach().cpu(), yc.detach(), **F32)
    assert_close(xd.grad.cpu(), xc.grad, **F32)
    assert_close(dev.weight.grad.cpu(), cpu.weight.grad, **F32)
    # The reference formula, on the device.
    ref = xd.detach() * torch.rsqrt(xd.detach().pow(2).mean(-1, keepdim=True) + 1e-6) * dev.weight
    assert_close(yd.detach().cpu(), ref.detach().cpu(), **F32)
    assert neuronsim.get_fallback_ops() == set()


def test_dropout_is_reproducible_under_torch_manual_seed():
    # As TorchNeuron's (its random ops run on the CPU), the masks come from the CPU stream.
    layer = nn.Dropout(p=0.3).train()
    x = torch.ones(64, 64, device="neuron")
    torch.manual_seed(123)
    a = layer(x).cpu()
    b = layer(x).cpu()
    torch.manual_seed(123)
    a2 = layer(x).cpu()
    b2 = layer(x).cpu()
    assert torch.equal(a, a2) and torch.equal(b, b2)  # same seed, same stream
    assert not torch.equal(a, b)  # the stream advances
    torch.manual_seed(124)
    assert not torch.equal(layer(x).cpu(), a)
    # Kept values are scaled by 1/(1-p); the drop rate is about p.
    kept = a != 0
    assert_close(a[kept], torch.full_like(a[kept], 1 / 0.7))
    assert abs(1 - kept.float().mean().item() - 0.3) < 0.03
    # CPU random numbers are draws of the same stream: the mask is the CPU's next draw.
    torch.manual_seed(123)
    torch.randn(1000)
    after_cpu_draw = layer(x).cpu()
    torch.manual_seed(123)
    torch.randn(1000)
    assert torch.equal(after_cpu_draw, layer.cpu()(x.cpu()))
    # torch.manual_seed seeds the device generator too (as it does CUDA's).
    assert torch.neuron.initial_seed() == 123
    # Eval mode is the identity.
    assert torch.equal(layer.eval()(x).cpu(), x.cpu())


def test_dropout_backward_uses_the_forward_mask():
    torch.neuron.manual_seed(7)
    x = torch.randn(32, 32, device="neuron", requires_grad=True)
    y = F.dropout(x, p=0.5, training=True)
    y.backward(torch.ones_like(y))
    mask = (y.detach() != 0).cpu()
    assert_close(x.grad.cpu(), mask.float() * 2.0)


def test_dropout_training_is_reproducible():
    """Two runs of a dropout model from the same device seed train to identical parameters."""

    def run():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 4))
        model = model.to("neuron")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        torch.neuron.manual_seed(42)
        x = torch.randn(8, 16).to("neuron")
        for _ in range(3):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
        return [p.detach().cpu() for p in model.parameters()]

    for a, b in zip(run(), run(), strict=True):
        assert torch.equal(a, b)


def test_gradient_accumulation_matches_full_batch():
    torch.manual_seed(0)
    cpu, dev = _pair(MLP())
    full = copy.deepcopy(dev)
    x, y = torch.randn(16, 16), torch.randn(16, 4)
    # Four micro-batches of 4, each loss scaled by 1/4, on the CPU and the device.
    for model, a, b in ((cpu, x, y), (dev, x.to("neuron"), y.to("neuron"))):
        for i in range(4):
            sl = slice(4 * i, 4 * i + 4)
            (F.mse_loss(model(a[sl]), b[sl]) / 4).backward()
    _assert_params_close(cpu, dev)
    # One batch of 16 on the device: the same gradients up to summation order.
    F.mse_loss(full(x.to("neuron")), y.to("neuron")).backward()
    for (n, p), q in zip(dev.named_parameters(), full.parameters(), strict=True):
        assert_close(p.grad.cpu(), q.grad.cpu(), rtol=1e-5, atol=1e-6, msg=n)
    # Stepping after accumulation matches the CPU.
    opt_c = torch.optim.SGD(cpu.parameters(), lr=0.1)
    opt_d = torch.optim.SGD(dev.parameters(), lr=0.1)
    opt_c.step()
    opt_d.step()
    _assert_params_close(cpu, dev)


def test_zero_grad_set_to_none_and_accumulate_in_place():
    torch.manual_seed(0)
    model = MLP().to("neuron")
    x = torch.randn(4, 16, device="neuron")
    model(x).sum().backward()
    g1 = {n: p.grad.clone() for n, p in model.named_parameters()}
    model(x).sum().backward()
    for n, p in model.named_parameters():
        assert_close(p.grad.cpu(), 2 * g1[n].cpu(), **F32)
    model.zero_grad(set_to_none=True)
    assert all(p.grad is None for p in model.parameters())


def test_module_to_keeps_shared_parameters():
    """A Parameter shared by two modules stays one Parameter after .to("neuron") (as with
    .to("cuda") or a dtype change), so weight tying survives the move and training updates a
    single tensor."""
    torch.manual_seed(0)
    emb = nn.Embedding(10, 8)
    head = nn.Linear(8, 10, bias=False)
    head.weight = emb.weight
    model = nn.ModuleDict({"emb": emb, "head": head})
    assert model.to(torch.float64).head.weight is model.emb.weight  # a dtype change keeps it
    model = model.to(torch.float32).to("neuron")
    assert (
        model.head.weight is model.emb.weight
    ), "after .to('neuron') the tied weight is two separate Parameters"
    assert len(list(model.parameters())) == 1
