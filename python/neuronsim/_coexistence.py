"""neuronsim's ``torch_neuronx`` stand-in and AWS's torch-neuronx in one environment.

Both distributions install a top-level ``torch_neuronx`` package: with both installed, the
directory holds whichever files were installed last (a mix after an upgrade of either), and
which package ``import torch_neuronx`` runs is an accident of install order. That must not pass
silently, so the stand-in refuses to import and neuronsim warns once when it registers.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os

# The distribution AWS publishes the real package as.
REAL_DISTRIBUTION = "torch-neuronx"


def _stand_in_init() -> str:
    # The stand-in sits next to neuronsim: site-packages/{neuronsim,torch_neuronx} in a wheel
    # install, python/{neuronsim,torch_neuronx} in a source tree.
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(os.path.dirname(here), "torch_neuronx", "__init__.py")


def conflict() -> str | None:
    """Why ``import torch_neuronx`` would not run neuronsim's stand-in, or None."""
    fix = (
        "For the simulated device, `pip uninstall -y torch-neuronx` and reinstall neuronsim "
        "(`pip install --force-reinstall --no-deps <neuronsim wheel>`: the uninstall also "
        "removes the files the two share); on a Trainium instance, `pip uninstall neuronsim`."
    )
    try:
        real = importlib.metadata.distribution(REAL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        real = None
    if real is not None:
        return (
            f"AWS's torch-neuronx {real.version} is installed next to neuronsim, whose "
            "torch_neuronx stand-in shares its package directory: `import torch_neuronx` would "
            f"run whichever files were installed last. {fix}"
        )
    spec = importlib.util.find_spec("torch_neuronx")
    if spec is None or spec.origin is None:
        return None
    if os.path.realpath(spec.origin) != os.path.realpath(_stand_in_init()):
        return (
            f"`import torch_neuronx` finds {spec.origin}, not neuronsim's stand-in "
            f"({_stand_in_init()}): another torch_neuronx comes first on sys.path. {fix}"
        )
    return None
