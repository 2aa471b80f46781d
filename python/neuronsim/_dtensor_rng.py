"""DTensor's RNG tracker on neuron devices.

DTensor's ``OffsetBasedRNGTracker`` gives each shard of a DTensor a disjoint part of one random
stream: it sets the device generator's 16-byte Philox state (seed, offset) to the shard's offset,
runs the op, and moves the offset past the whole tensor. A neuron generator's state has that
format (TorchNeuron's), but the device's random ops draw from the CPU stream (as TorchNeuron's,
which run on the CPU), which cannot skip to an offset. So while the tracker's region is open,
the device's default generator draws its Philox stream instead (the ISA rng instruction's
counter-based stream at that offset); outside regions it draws the CPU stream again.

A generator the user passes to a DTensor random op (``torch.nn.init.normal_(dt, generator=g)``,
``dt.uniform_(generator=g)``) takes the same path as on CUDA: the tracker reads its (seed,
offset) state, the op draws that stream at the shard's offset from the device's generator inside
the region, and the user's generator is left at the advanced offset.

Importing ``torch.distributed.tensor`` costs seconds, so the tracker is adapted when something
else imports it (an import hook), not at ``import neuronsim``.
"""

import contextlib
import importlib.abc
import importlib.util
import sys

from neuronsim import _C

_MODULE = "torch.distributed.tensor._random"


def _adapt(module) -> None:
    tracker = module.OffsetBasedRNGTracker
    distribute_region = tracker._distribute_region

    @contextlib.contextmanager
    def _distribute_region(self, spec, generator=None):
        with distribute_region(self, spec, generator):
            if self._device.type != "neuron" or not self.distribute_region_enabled:
                yield
                return
            index = self._device.index if self._device.index is not None else _C._current_device()
            _C._set_philox_region(index, True)
            try:
                yield
            finally:
                _C._set_philox_region(index, False)

    tracker._distribute_region = _distribute_region


class _Hook(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name != _MODULE:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None:
            return None
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _adapt(module)
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]


def install() -> None:
    """Adapts the tracker now if DTensor is loaded, else when it is imported."""
    if _MODULE in sys.modules:
        _adapt(sys.modules[_MODULE])
    elif not any(isinstance(f, _Hook) for f in sys.meta_path):
        sys.meta_path.insert(0, _Hook())
