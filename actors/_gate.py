"""Which episodes of a batch play their turns back to back.

With instant policies every episode of a batch is always ready to go on, and
the event loop runs ready tasks first in, first out: each step of an episode
(the coordinator's, then the actor's) waits behind one step of every other
episode in flight. At concurrency 64 that is a round of 64 episodes' data
(environment, observations, tasks) between two steps of one episode, more
than a core's second-level cache holds, and a turn cost about a third more
than at concurrency 1 (timed and counted in benchmarks/).

A :class:`TurnGate` per batch holds :data:`HOT_EPISODES` permits, which an
episode needs to play a turn it expects to be instant: it sends the request,
lets the loop run once (the actor's step) and finds the reply there, then goes
on at once with its next turn. So the loop's round holds only the few
episodes with a permit, and their data stays in the cache. A turn it expects
to be slow (its actor's last reply took more than :data:`INSTANT_S`, or was
closed at a deadline) takes no permit: the episode gives back the one it
holds, sends the request and waits, as outside a batch, so a batch of slow
policies goes as fast with the gate as without it. A reply not there after
the one pass shows the guess was wrong: the permit is given back before the
episode waits. An episode never holds a permit while it waits for anything
but one pass of the loop, so none can wait on another holding one (no
deadlock, also with nested batches or policies that wait for each other).

Permits go first come first served, in two lines: an episode back from a wait
(its guess turned instant mid-episode) before one starting or requeued. A
holder that has held its permit for :data:`SLICE_S` gives it to an episode
back from a wait, if one is in line, and queues again: such an episode waits
a slice or so, however long the instant episodes are.

Only the order in which ready work runs changes: every episode of the batch
is started, holds its environment and its actors, and runs its policies
exactly as before; results, logs and deadlines are the same. The gate works
on any anyio backend.
"""

from __future__ import annotations

from collections import deque
from contextvars import ContextVar
from dataclasses import dataclass
from time import perf_counter

import anyio

HOT_EPISODES = 4
"""Permits per batch: how many episodes may play turns back to back at once.

1 to 4 gave the same turn cost at concurrency 64 on a 1 MiB second-level
cache; 8 was a little dearer, 16 close to no gate (benchmarks/overhead.py).
"""

SLICE_S = 0.001
"""How long an episode may hold a permit while one back from a wait is in line (seconds)."""

INSTANT_S = 0.001
"""A reply within this long (seconds) makes its actor's next turn one expected to be instant."""


@dataclass(slots=True)
class Permit:
    """One episode's hold on the gate: whether it holds a permit, and since when."""

    held: bool = False
    since: float = 0.0


class TurnGate:
    """Permits to play turns back to back, handed over first come first served.

    Two lines: episodes taking a permit mid-episode (back from a wait, now
    expecting an instant reply) are served before those starting or queueing
    again at the end of a slice. An episode calls :meth:`admit` before each
    turn of a policy, :meth:`leave` before it waits for anything else.
    """

    def __init__(self, permits: int) -> None:
        if permits < 1:
            raise ValueError(f"a TurnGate needs at least one permit, got {permits}")
        self._free = permits
        self._returning: deque[anyio.Event] = deque()
        self._waiters: deque[anyio.Event] = deque()

    @property
    def returning(self) -> bool:
        """True while an episode back from a wait is in line for a permit."""
        return bool(self._returning)

    @property
    def free(self) -> int:
        """Permits nobody holds."""
        return self._free

    async def admit(self, permit: Permit, expect_instant: bool, mid_episode: bool) -> None:
        """Before a turn: hold a permit for a turn expected to be instant, none otherwise.

        A holder whose slice is over gives way to an episode back from a wait,
        and queues again.
        """
        if not expect_instant:
            self.leave(permit)  # a slow reply ahead: hold nothing while it comes
        elif not permit.held:
            await self.acquire(returning=mid_episode)
            permit.held, permit.since = True, perf_counter()
        elif self.returning and perf_counter() - permit.since >= SLICE_S:
            self.leave(permit)
            await self.acquire()
            permit.held, permit.since = True, perf_counter()

    def leave(self, permit: Permit) -> None:
        """Give back the permit ``permit`` holds, if any."""
        if permit.held:
            permit.held = False
            self.release()

    async def acquire(self, returning: bool = False) -> None:
        """Take a permit, waiting in line when none is free (``returning``: the first line)."""
        if self._free and not self._returning and not self._waiters:
            self._free -= 1
            return
        line = self._returning if returning else self._waiters
        handed = anyio.Event()
        line.append(handed)
        try:
            await handed.wait()
        except BaseException:
            if handed.is_set():
                self.release()  # handed over as we were cancelled: pass it on
            else:
                line.remove(handed)
            raise

    def release(self) -> None:
        """Give a permit back: to the first episode in line, else to the pool."""
        for line in (self._returning, self._waiters):
            if line:
                line.popleft().set()
                return
        self._free += 1


CURRENT_GATE: ContextVar[TurnGate | None] = ContextVar("actors_turn_gate", default=None)
"""The gate of the batch the current task runs in (None: no batch)."""
