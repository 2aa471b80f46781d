"""Lets the autograd engine's neuron device threads finish before Python finalizes.

Backward on a device other than the CPU runs on the engine's thread for that device index
(``pt_autograd_<d>``). That thread marks a graph task complete, which wakes the caller, and only
then drops its own reference to the task. When that reference is the last, the task's
destructor frees Python objects it holds, which needs the GIL: the ``contextvars`` context
PyTorch 2.13's ``backward()`` stashes for the device threads (so any backward), the
thread-local state's saved-tensor hooks (``torch.utils.checkpoint``'s), torch-function or
dispatch modes, tensors returned to Python. If the script ended right after its last backward,
the main thread may already be finalizing the interpreter: the device thread's ``take_gil`` then
exits the thread through a ``noexcept`` destructor and the process dies with "terminate called
without an active exception" (a matmul's backward as a script's last line: 6 runs in 6; under
``saved_tensors_hooks``: 9 in 20).

At exit, before finalization starts, one empty backward per used device goes through that
device's thread (``_C._drain_autograd_thread``, GIL released): the thread takes it only after it
has dropped the previous task, so every earlier task is gone when it completes. Its own task
holds only tensors made in C++, with no Python objects, so freeing it needs no GIL.
"""

import atexit

from neuronsim import _C


def drain_device_threads() -> None:
    """One empty backward through each used device's autograd thread (see the module doc)."""
    if not _C._is_initialized() or _C._is_in_bad_fork():
        return
    for d in range(_C._device_count()):
        if _C._memory_stats(d).get("allocation.all.allocated", 0) > 0:
            _C._drain_autograd_thread(d)


def _at_exit() -> None:
    try:
        drain_device_threads()
    except Exception:  # noqa: BLE001  (exit must go on; the race it guards is then open)
        pass


def install() -> None:
    atexit.register(_at_exit)
