"""``python -m chaosops.cli``: the ``chaosops`` command."""

import sys

from ._main import main

sys.exit(main())
