"""At interpreter exit, the autograd device threads let go of the last backward first.

PyTorch 2.13's backward (``torch.autograd.graph._engine_run_backward``) stashes a
``contextvars`` context in the calling thread's thread-local state, for the device threads, and
removes it when the engine returns; the graph task keeps its own reference. When a device's
autograd thread (``pt_autograd_<index>``) drops the finished graph task after the caller has
moved on, the context's last reference goes with it, and releasing it takes the GIL. If the
interpreter is finalizing by then (a script that ends right after ``loss.backward()``), taking
the GIL ends the thread with ``pthread_exit`` inside a noexcept destructor: "terminate called
without an active exception", exit status 134, after the script itself succeeded (the same
engine code runs CUDA's device threads; upstream pytorch/pytorch#180701 is about this race).

So an ``atexit`` handler, which runs before finalization, sends one tiny backward through the
engine (straight to it, without the stash) to each device that has been used, with the GIL
released while it waits: a device thread takes its tasks in order, so by the time it has run
this one it has finished the previous task and released the old graph task. The tiny backward is
a view's (no device program) into an uninitialised leaf; its own graph task holds no Python
object, and its tensors are kept for the rest of the process so none is freed at shutdown.
"""

from __future__ import annotations

import atexit

import torch

from neuronsim import _C

_kept: list[torch.Tensor] = []


def release_autograd_graph_tasks() -> None:
    if not _C._is_initialized() or torch.neuron._is_in_bad_fork():
        return
    engine = torch.autograd.Variable._execution_engine
    for d in range(torch.neuron.device_count()):
        if not torch.neuron.memory_stats(d).get("allocation.all.allocated", 0):
            continue  # never used: no autograd work either
        device = torch.device("neuron", d)
        leaf = torch.empty((1,), device=device, requires_grad=True)
        out = leaf.view(1)
        grad = torch.empty((1,), device=device)
        _kept.extend((leaf, out, grad))
        engine.run_backward((out,), (grad,), False, False, (), True, True)


def register() -> None:
    atexit.register(release_autograd_graph_tasks)
