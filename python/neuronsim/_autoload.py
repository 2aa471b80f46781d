"""PyTorch backend autoload hook (entry point group ``torch.backends``).

``import torch`` calls this for every installed backend. It registers the ``neuron`` device only
when ``NEURON_SIM=1``, and it never raises: an exception here would leave torch half-imported for
the rest of the process, so failures become a warning naming the reason.
"""

import os
import warnings


def _autoload() -> None:
    if os.environ.get("NEURON_SIM") != "1":
        return
    try:
        import neuronsim  # noqa: F401  (registers the device on import)
    except Exception as e:  # noqa: BLE001 - must not propagate into `import torch`
        warnings.warn(
            f"NEURON_SIM=1 but the simulated neuron device could not be registered: "
            f"{type(e).__name__}: {e}",
            RuntimeWarning,
            stacklevel=2,
        )
