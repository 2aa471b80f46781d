"""PyTorch backend autoload hook (entry point group ``torch.backends``).

``import torch`` calls this for every installed backend. It registers the ``neuron`` device only
when ``NEURON_SIM=1``, and it never raises: an exception here would leave torch half-imported for
the rest of the process, so failures become a warning naming the reason.
"""

import os
import sys
import warnings


def _forget_package() -> None:
    # The package was imported (without registering) only to reach this module; a later
    # `import neuronsim` must run its __init__ again.
    for name in ("neuronsim", "neuronsim._autoload"):
        sys.modules.pop(name, None)


def _autoload() -> None:
    pkg = sys.modules.get("neuronsim")
    if not getattr(pkg, "_deferred", False):
        return  # `import neuronsim` is itself importing torch: it registers when torch is ready
    if os.environ.get("NEURON_SIM") != "1":
        _forget_package()
        return
    try:
        pkg._setup()
        pkg._deferred = False
    except Exception as e:  # noqa: BLE001 - must not propagate into `import torch`
        _forget_package()
        warnings.warn(
            f"NEURON_SIM=1 but the simulated neuron device could not be registered: "
            f"{type(e).__name__}: {e}",
            RuntimeWarning,
            stacklevel=2,
        )
