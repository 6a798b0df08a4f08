"""Episode ids: unique, cheap to make, 32 hex characters like a uuid4's hex."""

from __future__ import annotations

import itertools
import os

_prefix = os.urandom(8).hex()
_counter = itertools.count()


def _reseed() -> None:
    # A forked child must not hand out its parent's next ids.
    global _prefix, _counter
    _prefix = os.urandom(8).hex()
    _counter = itertools.count()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reseed)


def new_episode_id() -> str:
    """A new episode id: 64 random bits chosen once per process, then a counter.

    Unique within the process and, with overwhelming probability, across
    processes and machines, without a system call per id.
    """
    return f"{_prefix}{next(_counter):016x}"
