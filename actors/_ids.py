"""Episode ids: unique, cheap to make, 32 hex characters like a uuid4's hex.

The first 16 characters are a counter scrambled by a bijection, so two ids of
one run differ from their first characters (a person can tell them apart and
type a short start of one); the last 16 are random per process, so ids of
different processes and machines differ too.
"""

from __future__ import annotations

import itertools
import os

_MASK = (1 << 64) - 1


def _fresh() -> tuple[str, int, itertools.count[int]]:
    return os.urandom(8).hex(), int.from_bytes(os.urandom(8), "big"), itertools.count()


_suffix, _offset, _counter = _fresh()


def _reseed() -> None:
    # A forked child must not hand out its parent's next ids.
    global _suffix, _offset, _counter
    _suffix, _offset, _counter = _fresh()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reseed)


def _scramble(n: int) -> int:
    """A bijection of 64-bit integers that spreads neighbours apart (the
    finalizer of SplitMix64: xor-shifts and odd multipliers, each invertible)."""
    n = ((n ^ (n >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    n = ((n ^ (n >> 27)) * 0x94D049BB133111EB) & _MASK
    return n ^ (n >> 31)


def new_episode_id() -> str:
    """A new episode id: a scrambled counter, then 64 random bits chosen once
    per process. Unique within the process (the scramble is a bijection) and,
    with overwhelming probability, across processes and machines, without a
    system call per id."""
    return f"{_scramble((next(_counter) + _offset) & _MASK):016x}{_suffix}"
