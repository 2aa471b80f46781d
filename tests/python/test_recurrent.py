"""Recurrent layers on the neuron device, forward and backward, against the CPU.

On any non-CPU device PyTorch's RNN code calls the fused cells (_thnn_fused_lstm_cell,
_thnn_fused_gru_cell and their backwards), which have no CPU kernel, so they must be native:
their values are computed on the host with CUDA's formulas and their time by the kernel
library's cell program. ISA mode runs the programs for the values.
"""

from __future__ import annotations

import copy

import neuronsim
import pytest
import torch
import torch.nn as nn
from neuronsim import _C
from torch.testing import assert_close

F32 = {"rtol": 1e-5, "atol": 1e-5}
FUSED = {
    "LSTM": ("aten::_thnn_fused_lstm_cell", "aten::_thnn_fused_lstm_cell_backward_impl"),
    "GRU": ("aten::_thnn_fused_gru_cell", "aten::_thnn_fused_gru_cell_backward"),
}


def _state(kind: str, shape: tuple[int, ...]):
    torch.manual_seed(1)
    h = torch.randn(shape)
    return (h, torch.randn(shape)) if kind in ("LSTM", "LSTMCell") else h


def _leaves(state) -> list[torch.Tensor]:
    return list(state) if isinstance(state, tuple) else [state]


def _run(module: nn.Module, x: torch.Tensor, state, device: str, seed: int = 0):
    """Output, final state and the gradients of input, initial state and parameters."""
    x = x.detach().to(device).requires_grad_()
    state = tuple(s.detach().to(device).requires_grad_() for s in _leaves(state))
    torch.manual_seed(seed)  # the dropout between layers draws the same masks on both devices
    out = module(x, state if len(state) == 2 else state[0])
    flat = [out] if isinstance(out, torch.Tensor) else [out[0], *_leaves(out[1])]
    # A weighted loss, so every output element's gradient differs. (Flattened first: a full sum
    # of batch_first's permuted output takes the CPU fallback of aten::sum, not a recurrent op.)
    loss = sum(
        (t * torch.linspace(-1, 1, t.shape[-1]).to(device)).flatten().square().sum() for t in flat
    )
    loss.backward()
    grads = [x.grad, *(s.grad for s in state)] + [p.grad for p in module.parameters()]
    return [t.detach().cpu() for t in flat], [g.cpu() for g in grads]


def _compare(module: nn.Module, x: torch.Tensor, state, tol: dict = F32) -> None:
    dev = copy.deepcopy(module).to("neuron")
    out_c, grads_c = _run(module, x, state, "cpu")
    out_d, grads_d = _run(dev, x, state, "neuron")
    for i, (a, b) in enumerate(zip(out_d, out_c, strict=True)):
        assert_close(a, b, msg=lambda m, i=i: f"output {i}: {m}", **tol)
    names = ["input", "state", "state2"][: 1 + len(_leaves(state))]
    names += [n for n, _ in module.named_parameters()]
    for n, a, b in zip(names, grads_d, grads_c, strict=True):
        assert_close(a, b, msg=lambda m, n=n: f"grad {n}: {m}", **tol)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize(
    "config",
    [
        {},
        {"bias": False},
        {"bidirectional": True},
        {"num_layers": 2, "dropout": 0.3},
        {"num_layers": 2, "bidirectional": True, "dropout": 0.5, "batch_first": True},
    ],
    ids=["plain", "no_bias", "bidirectional", "2_layers_dropout", "2_layers_bi_dropout_bf"],
)
def test_recurrent_layer_matches_cpu(kind, config):
    torch.manual_seed(0)
    module = getattr(nn, kind)(8, 16, **config)
    batch_first = config.get("batch_first", False)
    x = torch.randn(3, 5, 8) if batch_first else torch.randn(5, 3, 8)
    layers = config.get("num_layers", 1) * (2 if config.get("bidirectional") else 1)
    _compare(module, x, _state(kind, (layers, 3, 16)))
    assert neuronsim.get_fallback_ops() == set()
    for op in FUSED.get(kind, ()):
        assert op in neuronsim.get_executed_ops(), op


def test_rnn_relu_and_unbatched_input():
    torch.manual_seed(0)
    _compare(nn.RNN(8, 16, nonlinearity="relu"), torch.randn(5, 3, 8), _state("RNN", (1, 3, 16)))
    _compare(nn.LSTM(8, 16), torch.randn(5, 8), _state("LSTM", (1, 16)))
    _compare(nn.GRU(8, 16), torch.randn(5, 8), _state("GRU", (1, 16)))
    assert neuronsim.get_fallback_ops() == set()


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("bias", [True, False])
def test_cell_matches_cpu(kind, bias):
    torch.manual_seed(0)
    _compare(getattr(nn, kind)(8, 16, bias=bias), torch.randn(4, 8), _state(kind, (4, 16)))
    assert neuronsim.get_fallback_ops() == set()


def test_lstm_output_only_gradient():
    # Only the last hidden state feeds the loss: the cell state's gradient is undefined at the
    # last step (the backward takes grad_cy = None).
    torch.manual_seed(0)
    cpu = nn.LSTM(8, 16)
    dev = copy.deepcopy(cpu).to("neuron")
    x = torch.randn(4, 2, 8)
    grads = []
    for m, d in ((cpu, "cpu"), (dev, "neuron")):
        xs = x.detach().to(d).requires_grad_()
        _, (h, _) = m(xs)
        h.square().sum().backward()
        grads.append([xs.grad.cpu()] + [p.grad.cpu() for p in m.parameters()])
    for a, b in zip(grads[1], grads[0], strict=True):
        assert_close(a, b, **F32)


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 12, num_layers=2, dropout=0.2, bidirectional=True)
        self.head = nn.Linear(24, 3)

    def forward(self, x):
        return self.head(self.lstm(x)[0])


def test_lstm_training_loop_matches_cpu_without_fallback():
    torch.manual_seed(0)
    cpu = Tagger()
    dev = copy.deepcopy(cpu).to("neuron")
    opt_c = torch.optim.Adam(cpu.parameters(), lr=0.01)
    opt_d = torch.optim.Adam(dev.parameters(), lr=0.01)
    x = torch.randn(7, 4, 6)
    target = torch.randint(0, 3, (7, 4))
    losses = []
    for step in range(4):
        for model, opt, dname in ((cpu, opt_c, "cpu"), (dev, opt_d, "neuron")):
            opt.zero_grad()
            torch.manual_seed(100 + step)
            out = model(x.to(dname))
            loss = nn.functional.cross_entropy(out.flatten(0, 1), target.to(dname).flatten())
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[-1] == pytest.approx(losses[-2], rel=1e-5, abs=1e-6)
    for (n, a), (_, b) in zip(cpu.named_parameters(), dev.named_parameters(), strict=True):
        assert_close(
            b.detach().cpu(), a.detach(), msg=lambda m, n=n: f"{n}: {m}", rtol=1e-4, atol=1e-5
        )
    assert losses[-1] < losses[0]
    assert neuronsim.get_fallback_ops() == set()


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_isa_mode_cells_compute_the_values(kind):
    torch.manual_seed(0)
    module = getattr(nn, kind)(8, 16, num_layers=2, bidirectional=True)
    _C._set_isa_mode(True)
    try:
        _compare(
            module, torch.randn(5, 3, 8), _state(kind, (4, 3, 16)), {"rtol": 1e-4, "atol": 1e-4}
        )
    finally:
        _C._set_isa_mode(False)
    assert neuronsim.get_fallback_ops() == set()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_reduced_precision_lstm_close_to_fp32(dtype):
    torch.manual_seed(0)
    cpu = nn.LSTM(8, 16)
    dev = copy.deepcopy(cpu).to("neuron", dtype)
    x = torch.randn(5, 3, 8)
    out = dev(x.to("neuron", dtype))[0]
    assert out.dtype == dtype
    assert_close(out.float().cpu(), cpu(x)[0], rtol=0.05, atol=0.02)


def test_fused_cell_bad_input_is_a_clear_error(neuron):
    g = torch.randn(2, 64, device=neuron)
    with pytest.raises(RuntimeError, match=r"state must be \[2, 16\]"):
        torch.ops.aten._thnn_fused_lstm_cell(g, g, torch.randn(2, 15, device=neuron))
    with pytest.raises(RuntimeError, match="hidden_gates of sizes"):
        torch.ops.aten._thnn_fused_lstm_cell(g, g[:, :32], torch.randn(2, 16, device=neuron))
    with pytest.raises(RuntimeError, match="input_bias must be"):
        torch.ops.aten._thnn_fused_gru_cell(
            g[:, :48],
            g[:, :48],
            torch.randn(2, 16, device=neuron),
            torch.randn(47, device=neuron),
            torch.randn(47, device=neuron),
        )
    with pytest.raises(RuntimeError, match="not implemented for 'Int'"):
        i = torch.ones(2, 64, dtype=torch.int32, device=neuron)
        torch.ops.aten._thnn_fused_lstm_cell(
            i, i, torch.ones(2, 16, dtype=torch.int32, device=neuron)
        )
    with pytest.raises(RuntimeError, match="workspace must be"):
        torch.ops.aten._thnn_fused_gru_cell_backward(
            torch.randn(2, 16, device=neuron), torch.randn(2, 79, device=neuron), True
        )
    with pytest.raises(RuntimeError, match="same device"):
        torch.ops.aten._thnn_fused_lstm_cell(g, g, torch.randn(2, 16))


def _module_db_cases():
    from torch.testing._internal.common_modules import module_db

    names = ("RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell")
    return [m for m in module_db if m.module_cls.__name__ in names]


def _tensors(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, tuple | list):
        return [t for e in v for t in _tensors(e)]
    return []


def _moved(v, device):
    if isinstance(v, torch.Tensor):
        return v.detach().to(device).requires_grad_(v.requires_grad)
    if isinstance(v, tuple | list):
        return type(v)(_moved(e, device) for e in v)
    return v


@pytest.mark.parametrize("info", _module_db_cases(), ids=lambda m: m.module_cls.__name__)
def test_module_db_samples_match_cpu(info):
    # PyTorch's own ModuleInfo samples (projections, unbatched input, no-bias, relu, ...), forward
    # and the gradients of every input and parameter, in training mode.
    samples = info.module_inputs_func(
        info, device="cpu", dtype=torch.float32, requires_grad=True, training=True
    )
    for k, s in enumerate(samples):
        torch.manual_seed(k)
        cpu = info.module_cls(*s.constructor_input.args, **s.constructor_input.kwargs)
        dev = copy.deepcopy(cpu).to("neuron")
        results = []
        for m, d in ((cpu, "cpu"), (dev, "neuron")):
            args = _moved(s.forward_input.args, d)
            kwargs = {n: _moved(v, d) for n, v in s.forward_input.kwargs.items()}
            outs = _tensors(m(*args, **kwargs))
            leaves = [t for t in _tensors((args, list(kwargs.values()))) if t.requires_grad]
            leaves += list(m.parameters())
            grads = torch.autograd.grad(
                [o.flatten().square().sum() for o in outs], leaves, allow_unused=True
            )
            results.append([t.detach().cpu() for t in outs + [g for g in grads if g is not None]])
        assert len(results[0]) == len(results[1]), f"sample {k}"
        for a, b in zip(results[1], results[0], strict=True):
            assert_close(a, b, msg=lambda m, k=k: f"sample {k}: {m}", **F32)
    assert neuronsim.get_fallback_ops() == set()
