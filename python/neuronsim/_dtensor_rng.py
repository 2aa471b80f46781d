"""DTensor's RNG tracker on neuron devices.

The neuron generator's state is the CPU generator's (5056 bytes: its stream is the CPU's), but
DTensor's ``OffsetBasedRNGTracker`` reads and writes a 16-byte Philox state (seed, offset) so
that the shards of one DTensor draw disjoint parts of one stream. For neuron devices the tracker
sees the generator's (seed, offset) instead; setting a 16-byte state opens a Philox region in
the generator (random ops inside it draw the ISA rng instruction's Philox stream at that
offset), and fork_rng restoring the saved CPU state closes it.

A generator the user passes to a DTensor random op (``torch.nn.init.normal_(dt, generator=g)``,
``dt.uniform_(generator=g)``) takes the same path as on CUDA: the tracker reads its 16-byte
(seed, offset) state, the op draws that Philox stream at the shard's offset (from the device's
generator, inside the region), and the user's generator is left at the advanced offset; the
device's default generator is not touched.

Importing ``torch.distributed.tensor`` costs seconds, so the tracker is adapted when something
else imports it (an import hook), not at ``import neuronsim``.
"""

import importlib.abc
import importlib.util
import sys

import torch

_MODULE = "torch.distributed.tensor._random"


def _philox_state(gen: torch.Generator) -> torch.Tensor:
    raw = gen.initial_seed().to_bytes(8, "little") + gen.get_offset().to_bytes(8, "little")
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8)


def _set_philox_state(gen: torch.Generator, state: torch.Tensor) -> None:
    raw = bytes(state.cpu().tolist())
    seed, offset = int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:], "little")
    if seed != gen.initial_seed():
        gen.manual_seed(seed)
    gen.set_offset(offset)


class _PhiloxView:
    """A user's neuron generator as the tracker uses a user-passed generator: get_state and
    set_state of its (seed, offset), as a CUDA generator's state is."""

    def __init__(self, gen: torch.Generator):
        self._gen = gen

    def get_state(self) -> torch.Tensor:
        return _philox_state(self._gen)

    def set_state(self, state: torch.Tensor) -> None:
        _set_philox_state(self._gen, state)


def _adapt(module) -> None:
    tracker = module.OffsetBasedRNGTracker
    get_state, set_state = tracker._get_device_state, tracker._set_device_state
    distribute_region = tracker._distribute_region

    def _get_device_state(self):
        if self._device.type != "neuron":
            return get_state(self)
        return _philox_state(self._device_handle._generator(self._device)).to(self._device)

    def _set_device_state(self, state):
        if self._device.type != "neuron" or state.numel() != 16:
            return set_state(self, state)
        _set_philox_state(self._device_handle._generator(self._device), state)
        return None

    def _distribute_region(self, spec, generator=None):
        if generator is not None and generator.device.type == "neuron":
            generator = _PhiloxView(generator)
        return distribute_region(self, spec, generator)

    tracker._get_device_state = _get_device_state
    tracker._set_device_state = _set_device_state
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
