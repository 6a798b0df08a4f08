"""Ctrl-C while a run stops cleanly.

The first SIGINT or SIGTERM of a run cancels its batches; the finished
episodes are kept, summary.json is written and the exact resume command is
printed. That takes a moment, and a second Ctrl-C in it (a double press, or
``timeout -s INT``, which signals the process and its group) must not break
it: once the first signal is taken, a second one only says to wait, and a
third stops at once (exit 130, no summary). Signals within
:data:`ONE_PRESS_S` of the last one counted are one press: a double press,
or a group's signals, on a loaded machine arrive tens of milliseconds apart.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .errors import note

__all__ = ["hold_signals", "restoring_signals"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)

ONE_PRESS_S = 0.5
"""Signals this close to the last one counted are the same press."""


class _Again:
    """The handler of the signals after the first: wait, then force."""

    def __init__(self) -> None:
        self.presses = 0
        self.last = time.monotonic()  # the first press, taken before this handler

    def __call__(self, signum: int, frame: Any) -> None:
        now = time.monotonic()
        if now - self.last < ONE_PRESS_S:
            return
        self.last = now
        self.presses += 1
        if self.presses > 1:
            raise KeyboardInterrupt
        note("stopping, please wait: the finished episodes and summary.json are being "
             "written (once more to stop at once, without them)")  # fmt: skip


def hold_signals() -> None:
    """From now on, a SIGINT or SIGTERM says to wait, and the next one forces."""
    handler = _Again()
    for signum in _SIGNALS:
        signal.signal(signum, handler)


@contextmanager
def restoring_signals() -> Iterator[None]:
    """The signal handlers as they were once the block ends (for a caller of
    ``main`` in the same process)."""
    previous = [signal.getsignal(signum) for signum in _SIGNALS]
    try:
        yield
    finally:
        for signum, handler in zip(_SIGNALS, previous, strict=True):
            signal.signal(signum, handler)
