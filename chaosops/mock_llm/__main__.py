"""``python -m chaosops.mock_llm``: the same as ``chaosops mock-llm``."""

import sys

from .cli import main

sys.exit(main())
