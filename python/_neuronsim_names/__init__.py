"""The NKI import names ``neuronxcc.nki`` (legacy NKI) and ``nki`` (the current package) as
aliases of neuronsim's NKI front end (``neuronsim.nki.legacy`` and ``neuronsim.nki.current``).

Installed by a ``.pth`` file, so it runs at interpreter start: it imports nothing heavy and only
adds a finder. Where the real package is installed (neuronx-cc's ``neuronxcc``, the ``nki``
wheel) it wins, unless ``NEURON_SIM=1`` asks for the simulator; then ``neuronxcc.nki`` / ``nki``
are neuronsim's and the first kernel run says so on stderr. No file of the real packages is
touched: the names are resolved here, not installed as directories.
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_ALIASES = (
    ("neuronxcc.nki", "neuronsim.nki.legacy"),
    ("nki", "neuronsim.nki.current"),
)


def _real_spec(name):
    """The installed package of that top-level name, found by the ordinary path finder."""
    try:
        return importlib.machinery.PathFinder.find_spec(name)
    except (ImportError, ValueError):
        return None


def real_packages():
    """Top-level names ("neuronxcc", "nki") a real installation provides."""
    return [n for n in ("neuronxcc", "nki") if _real_spec(n) is not None]


def _simulate():
    return os.environ.get("NEURON_SIM", "") == "1"


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module):
        pass


class _RootLoader(importlib.abc.Loader):
    """An empty ``neuronxcc`` package holding only ``nki`` (when neuronx-cc is not installed)."""

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__path__ = []
        module.__doc__ = "neuronsim's stand-in for neuronx-cc: only neuronxcc.nki is here."


class NkiNameFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        top = fullname.split(".", 1)[0]
        if top not in ("neuronxcc", "nki"):
            return None
        if _real_spec(top) is not None and not _simulate():
            return None
        if fullname == "neuronxcc":
            if _real_spec("neuronxcc") is not None:
                return None  # the real compiler package; only its .nki is neuronsim's
            return importlib.machinery.ModuleSpec(fullname, _RootLoader(), is_package=True)
        for name, target in _ALIASES:
            if fullname == name or fullname.startswith(name + "."):
                mapped = target + fullname[len(name) :]
                if importlib.util.find_spec(mapped) is None:
                    return None
                return importlib.machinery.ModuleSpec(
                    fullname, _AliasLoader(mapped), is_package=True
                )
        return None


def install():
    if not any(isinstance(f, NkiNameFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, NkiNameFinder())


install()
