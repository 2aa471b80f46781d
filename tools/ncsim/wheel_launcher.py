#!python
"""``ncsim`` in a wheel install: runs the C++ tool shipped in the package (neuronsim/bin/ncsim).

Installed as the ``ncsim`` script by cmake/NeuronsimWheel.cmake. It locates the package without
importing it: ncsim is torch-free, and importing neuronsim would load torch.
"""

import importlib.util
import os
import sys


def main() -> None:
    spec = importlib.util.find_spec("neuronsim")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("ncsim: the neuronsim package is not installed in this Python environment")
    exe = os.path.join(spec.submodule_search_locations[0], "bin", "ncsim")
    if not os.access(exe, os.X_OK):
        sys.exit(f"ncsim: {exe} is missing: this neuronsim install has no ncsim (reinstall it)")
    os.execv(exe, ["ncsim", *sys.argv[1:]])


if __name__ == "__main__":
    main()
