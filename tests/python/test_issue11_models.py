"""What issue 11 must show, as a user would write it: a tiny ResNet (convolutions, batch norm,
max/avg pooling, a GroupNorm block, nearest and bilinear interpolation) and a 2-expert MoE layer
(top-1 router, per-expert token selection, index_add_, a histc load-balancing loss) train for
three steps on the neuron device and on the CPU from the same initial weights: losses,
parameters and batch norm's running statistics match after every step, and no op takes the CPU
fallback.
"""

import copy

import neuronsim
import torch
import torch.nn as nn
import torch.nn.functional as F

TOL = {"rtol": 1e-4, "atol": 1e-5}


class TinyResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2)
        )
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1)
        self.gn = nn.GroupNorm(4, 8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.up = nn.Conv2d(16, 8, 1)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        x = self.stem(x)  # 8 x 8
        x = F.relu(self.gn(self.conv1(x)) + x)  # residual GroupNorm block
        y = F.relu(self.bn2(self.conv2(x)))  # 4 x 4
        y = F.interpolate(self.up(y), scale_factor=2, mode="nearest")  # back to 8 x 8
        x = x + y
        x = F.interpolate(x, size=(12, 12), mode="bilinear", align_corners=False)
        x = F.avg_pool2d(x, 2)
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


class MoE(nn.Module):
    def __init__(self, d=16, hidden=32, experts=2):
        super().__init__()
        self.gate = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(d, hidden), nn.SiLU(), nn.Linear(hidden, d))
            for _ in range(experts)
        )

    def forward(self, x):
        b, t, d = x.shape
        flat = x.reshape(-1, d)
        probs = self.gate(flat).softmax(-1)
        weight, chosen = probs.max(-1)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            tokens = torch.where(chosen == e)[0]
            out.index_add_(0, tokens, expert(flat[tokens]) * weight[tokens, None])
        n = len(self.experts)
        load = torch.histc(chosen.float(), bins=n, min=0, max=n - 1) / chosen.numel()
        aux = n * (load * probs.mean(0)).sum()
        return out.reshape(b, t, d), aux


def _train(model, batches, loss_fn, dev):
    model = copy.deepcopy(model).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    history = []
    for x, target in batches:
        loss = loss_fn(model, x.to(dev), target.to(dev))
        opt.zero_grad()
        loss.backward()
        opt.step()
        state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
        history.append((loss.detach().cpu(), state))
    return history


def _compare(cpu, dev):
    assert len(cpu) == len(dev) == 3
    for (lc, sc), (ld, sd) in zip(cpu, dev, strict=True):
        torch.testing.assert_close(ld, lc, **TOL)
        assert sc.keys() == sd.keys()
        for k in sc:
            torch.testing.assert_close(sd[k], sc[k], **TOL, msg=k)


def test_tiny_resnet_with_group_norm_and_interpolate_trains_like_cpu():
    torch.manual_seed(0)
    model = TinyResNet()
    batches = [(torch.randn(4, 3, 16, 16), torch.randint(0, 4, (4,))) for _ in range(3)]

    def loss_fn(m, x, t):
        return F.cross_entropy(m(x), t)

    cpu = _train(model, batches, loss_fn, "cpu")
    neuronsim.clear_op_tracking()
    dev = _train(model, batches, loss_fn, "neuron")
    assert not neuronsim.get_fallback_ops(), sorted(neuronsim.get_fallback_ops())
    executed = {o.split(".")[0] for o in neuronsim.get_executed_ops()}
    for op in (
        "native_group_norm_backward",
        "upsample_bilinear2d_backward",
        "upsample_nearest2d_backward",
        "native_batch_norm_backward",
    ):
        assert "aten::" + op in executed, op
    _compare(cpu, dev)
    # The running statistics moved (three training steps) and match.
    rm = dev[-1][1]["stem.1.running_mean"]
    assert rm.abs().sum() > 0
    assert dev[-1][1]["bn2.num_batches_tracked"].item() == 3


def test_two_expert_moe_layer_trains_like_cpu():
    torch.manual_seed(1)
    model = MoE()
    batches = [(torch.randn(2, 6, 16), torch.randn(2, 6, 16)) for _ in range(3)]

    def loss_fn(m, x, t):
        y, aux = m(x)
        return F.mse_loss(y, t) + 0.01 * aux

    cpu = _train(model, batches, loss_fn, "cpu")
    neuronsim.clear_op_tracking()
    dev = _train(model, batches, loss_fn, "neuron")
    assert not neuronsim.get_fallback_ops(), sorted(neuronsim.get_fallback_ops())
    assert "aten::histc" in {o.split(".")[0] for o in neuronsim.get_executed_ops()}
    _compare(cpu, dev)
