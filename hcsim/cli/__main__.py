"""``python -m hcsim.cli``: the ``hcsim`` command."""

import sys

from . import main

sys.exit(main())
