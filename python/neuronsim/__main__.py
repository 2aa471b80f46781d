"""``python -m neuronsim``: the ``neuronsim`` command line."""

import sys

from neuronsim.cli.main import main

sys.exit(main())
