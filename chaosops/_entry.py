"""The ``chaosops`` console script: Ctrl-C while the command loads is one line.

Loading the command imports pydantic, rich, anyio and the world, which takes
a few hundred milliseconds; a Ctrl-C then would print an import's traceback.
"""

from __future__ import annotations

import os
import signal
import sys


def main() -> int:
    previous = signal.signal(signal.SIGINT, _while_loading)
    from chaosops.cli import main as command  # the command's imports

    signal.signal(signal.SIGINT, previous)
    code = command(keep_signals=True)
    # the command is over and its outputs written: a signal now (a late third
    # Ctrl-C) must not turn its exit code into a death by signal
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    return code


def _while_loading(signum: int, frame: object) -> None:
    sys.stderr.write("chaosops: interrupted\n")
    sys.stderr.flush()
    os._exit(130)  # nothing is open or written yet: no clean-up to run
