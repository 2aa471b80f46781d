"""Hugging Face Accelerate in one process: ``Accelerator()`` picks the neuron device by itself
(it finds ``torch_neuronx`` and ``torch.neuron.is_available()``), prepares a model, optimizer,
scheduler and dataloader, and trains; the reference is the same loop with
``Accelerator(cpu=True)``. Two ranks: tests/python/test_distributed.py launches
tests/python/distributed/accelerate_check.py with ``accelerate launch --num_processes 2``."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch_neuronx

accelerate = pytest.importorskip("accelerate")

from accelerate import Accelerator  # noqa: E402
from accelerate.state import AcceleratorState, PartialState  # noqa: E402
from accelerate.utils import DistributedType, set_seed  # noqa: E402

TOL = {"rtol": 1e-5, "atol": 1e-6}


def _reset_state():
    AcceleratorState._reset_state(reset_partial_state=True)
    PartialState._reset_state()


def _train(cpu: bool):
    _reset_state()
    accelerator = Accelerator(cpu=cpu)
    set_seed(0)  # torch.manual_seed on the CPU and every device (accelerate's own)
    model = torch.nn.Sequential(
        torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.Dropout(0.1), torch.nn.Linear(32, 3)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    g = torch.Generator().manual_seed(1)
    data = torch.utils.data.TensorDataset(torch.randn(16, 12, generator=g), torch.arange(16) % 3)
    loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=True)
    model, opt, loader, sched = accelerator.prepare(model, opt, loader, sched)
    torch_neuronx.clear_op_tracking()
    losses = []
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        accelerator.backward(loss)
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(loss.detach())
    weights = [p.detach() for p in accelerator.unwrap_model(model).parameters()]
    return (accelerator.device, accelerator.distributed_type), losses, weights


def test_accelerator_picks_neuron_and_trains_as_on_cpu():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, cpu_losses, cpu_weights = _train(cpu=True)
        (device, kind), losses, weights = _train(cpu=False)
        executed, fallbacks = torch_neuronx.get_executed_ops(), torch_neuronx.get_fallback_ops()
    _reset_state()
    assert device.type == "neuron", device
    assert kind == DistributedType.NO
    assert all(x.device.type == "neuron" for x in losses + weights)
    torch.testing.assert_close(torch.stack(losses).cpu(), torch.stack(cpu_losses), **TOL)
    for w, c in zip(weights, cpu_weights, strict=True):
        torch.testing.assert_close(w.cpu(), c, **TOL)
    assert {"aten::addmm", "aten::native_dropout"} <= set(executed)
    assert fallbacks == [], fallbacks
