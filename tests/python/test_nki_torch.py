"""NKI kernels from PyTorch, as TorchNeuron calls them: an RMSNorm written in NKI registered
with nki_op + register_autograd inside a small model, trained on the neuron device in eager mode
and under torch.compile with the same losses as the model with the PyTorch op; wrap_nki with a
grid; @nki.jit called on neuron tensors; the launch in torch.profiler and the neuronsim trace."""

import json

import neuronsim
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np
import pytest
import torch
from neuronsim.nki.torch_ops import nki_op, wrap_nki
from nki_kernels import legacy_kernels as lk

EPS = 1e-6


@nki.jit
def rmsnorm_fwd(x, w, out):
    rows, d = x.shape
    i_f = nl.arange(d)[None, :]
    w_row = nl.load(w.reshape((1, d))[nl.arange(1)[:, None], i_f])
    w_all = w_row.broadcast_to((128, d))
    for t in nl.affine_range((rows + 127) // 128):
        i_p = t * 128 + nl.arange(128)[:, None]
        xt = nl.load(x[i_p, i_f], mask=(i_p < rows))
        ms = nl.mean(nl.square(xt, mask=(i_p < rows)), axis=1, keepdims=True, mask=(i_p < rows))
        inv = nl.rsqrt(nl.add(ms, EPS, mask=(i_p < rows)), mask=(i_p < rows))
        y = nl.multiply(nl.multiply(xt, inv, mask=(i_p < rows)), w_all, mask=(i_p < rows))
        nl.store(out[i_p, i_f], value=y, mask=(i_p < rows))


@nki_op("nkitest::rmsnorm", mutates_args=())
def nki_rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    wrap_nki(rmsnorm_fwd)(x, w, out)
    return out


def _setup(ctx, inputs, output):
    x, w = inputs
    ctx.save_for_backward(x, w)


def _backward(ctx, g):
    x, w = ctx.saved_tensors
    inv = torch.rsqrt((x * x).mean(dim=1, keepdim=True) + EPS)
    gw = g * w
    dx = inv * gw - x * inv.pow(3) * (gw * x).mean(dim=1, keepdim=True)
    dw = (g * x * inv).sum(dim=0)
    return dx, dw


nki_rmsnorm.register_autograd(_backward, setup_context=_setup)


def torch_rmsnorm(x, w):
    return x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + EPS) * w


class Block(torch.nn.Module):
    def __init__(self, norm, d=64):
        super().__init__()
        self.up = torch.nn.Linear(d, d)
        self.w = torch.nn.Parameter(torch.linspace(0.5, 1.5, d))
        self.down = torch.nn.Linear(d, d)
        self.norm = norm

    def forward(self, x):
        return self.down(self.norm(torch.relu(self.up(x)), self.w))


def _train(norm, compile_model=False, steps=3):
    torch.manual_seed(0)
    model = Block(norm).to("neuron")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    fn = torch.compile(model) if compile_model else model
    x = torch.randn(200, 64, device="neuron")
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = fn(x).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_nki_rmsnorm_trains_like_the_torch_op_eager():
    ref = _train(torch_rmsnorm)
    got = _train(nki_rmsnorm)
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    assert got[2] < got[0]


def test_nki_rmsnorm_under_torch_compile():
    # Dynamo counts graph breaks for the whole process: earlier tests' are in the count.
    breaks_before = neuronsim.compile_stats()["graph_breaks"]
    ref = _train(torch_rmsnorm)
    got = _train(nki_rmsnorm, compile_model=True)
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    stats = neuronsim.compile_stats()
    # One forward and one backward graph; the kernel is one eager node inside the launch.
    assert stats["graph_breaks"] == breaks_before
    assert any(g["eager_nodes"].get("nkitest::rmsnorm") == 1 for g in stats["per_graph"])


def test_wrap_nki_grid_on_neuron_tensors():
    a = torch.rand(256, 1024, device="neuron")
    b = torch.rand(256, 1024, device="neuron")
    c = wrap_nki(lk.add_grid_kernel)[2, 2](a, b)
    assert c.device.type == "neuron"
    torch.testing.assert_close(c.cpu(), (a + b).cpu())


def test_jit_kernel_on_neuron_tensors():
    x = torch.randn(100, 48, device="neuron")
    y = lk.scale_shift_kernel(x, 2.0, 1.0)
    assert isinstance(y, torch.Tensor) and y.device.type == "neuron"
    torch.testing.assert_close(y.cpu(), x.cpu() * 2 + 1)


def test_kernel_in_profiler_and_trace(tmp_path):
    x = torch.randn(128, 64, device="neuron")
    w = torch.ones(64, device="neuron")
    with torch.profiler.profile() as prof:
        nki_rmsnorm(x, w)
    names = {e.key for e in prof.key_averages()}
    assert "nkitest::rmsnorm" in names
    path = tmp_path / "t.json"
    neuronsim._C._trace_start(str(path))
    try:
        nki_rmsnorm(x, w)
    finally:
        neuronsim._C._trace_stop("{}")
    doc = json.loads(path.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    kernels = [e for e in events if e.get("ph") == "X" and e.get("name") == "rmsnorm_fwd"]
    assert kernels, "the kernel's launch is on the trace"
    srcs = {e["args"].get("src") for e in events if e.get("ph") == "X" and "args" in e}
    assert any(s and s.startswith("test_nki_torch.py:") for s in srcs)


@pytest.mark.parametrize("shape", [(3, 64), (130, 32)])
def test_fake_mode_gives_shapes(shape):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(shape)
        w = torch.empty(shape[1])
        y = nki_rmsnorm(x, w)
    assert tuple(y.shape) == shape
