"""One Ray instance at a time across the suite's processes."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

RAY_TIMEOUT = 600
"""A command that starts a local Ray instance (head, raylet, worker actors): 8
to 20 s on 2 idle cores, over 300 s at a load of 8 to 9 (measured)."""


@contextmanager
def one_ray_instance(factory: pytest.TempPathFactory) -> Iterator[None]:
    """Hold the suite's Ray lock: two tests that start Ray instances never run
    at once, on pytest-xdist's workers either (two instances on two cores
    starve each other's workers past any bound). The lock file sits beside the
    workers' temporary folders, which share that parent."""
    path = factory.getbasetemp().parent / "ray.lock"
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
