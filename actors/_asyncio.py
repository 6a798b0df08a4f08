"""The runtime's asyncio-native parts, in one place.

Why native: with instant policies the runtime's own work is most of a turn,
and anyio's general machinery doubled it. A memory object stream costs its
state and waiter tables per mailbox (five per episode) and, on every blocking
``receive()``, a checkpoint (a whole extra pass of the event loop) and an
``anyio.Event``, twice a turn; an anyio task costs five times an asyncio one
to start and run; ``anyio.lowlevel.checkpoint`` is a coroutine call where a
bare yield does. Here a mailbox is a deque whose one reader waits on a bare
future the writer resolves, a deadline is a loop timer, an episode's actors
are asyncio tasks. Policy calls still run in anyio cancel scopes, and the
mailboxes raise anyio's exceptions. Everything else runs on anyio.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Coroutine
from types import TracebackType, coroutine
from typing import Any, Generic, TypeVar

import anyio
from anyio import ClosedResourceError, EndOfStream, WouldBlock

T = TypeVar("T")

_SAME_BASE_S = 0.05  # loop.time() within this of time.monotonic(): the same clock
_EARLY_WAIT_S = 0.001  # after a timer fired early: wait a millisecond, do not spin


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop, or None on another backend (e.g. trio)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def turn_clock(loop: asyncio.AbstractEventLoop) -> Callable[[], float]:
    """The clock an episode's deadlines are set and judged on, on asyncio.

    ``time.monotonic``, the base of the standard loop's and uvloop's clocks,
    read finely: uvloop's ``loop.time()`` counts whole milliseconds, so a
    deadline judged on it could fall up to a millisecond early. The loop's own
    clock for a loop whose time has another base.
    """
    if abs(loop.time() - time.monotonic()) < _SAME_BASE_S:
        return time.monotonic
    return loop.time


def cancelled_by_the_policy() -> bool:
    """Whether a CancelledError came from the policy's own code (it awaited a
    future someone else cancelled) rather than from cancelling the actor's
    task: no cancellation of the task is pending."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() == 0


class AsyncioMailbox(Generic[T]):
    """:class:`~actors._mailbox.Mailbox`'s interface for one episode on asyncio:
    a bounded deque, and a bare future its one reader waits on."""

    def __init__(
        self, size: int, loop: asyncio.AbstractEventLoop, clock: Callable[[], float]
    ) -> None:
        self._items: deque[T] = deque()
        self._size = size
        self._closed = False
        self._loop = loop
        self._waiter: asyncio.Future[None] | None = None
        self.clock = clock  # turn_clock(loop), read once for the episode's mailboxes

    def put_nowait(self, item: T) -> None:
        if self._closed:
            raise ClosedResourceError
        if len(self._items) >= self._size:
            raise WouldBlock
        self._items.append(item)
        self._wake()

    async def put(self, item: T) -> None:
        # Never full in the runtime: an actor replies only while its turn is open.
        self.put_nowait(item)

    def put_latest(self, item: T) -> None:
        while len(self._items) >= self._size:
            self._items.popleft()  # stale: for a turn already closed
        self.put_nowait(item)

    def take(self) -> T | None:
        return self._items.popleft() if self._items else None

    async def get(self) -> T:
        while not self._items:
            if self._closed:
                raise EndOfStream
            await self._wait()
        return self._items.popleft()

    async def get_before(self, deadline: float) -> T | None:
        least = 0.0
        while not self._items:
            left = deadline - self.clock()
            if left <= 0 or self._closed:
                return None
            timer = self._loop.call_later(max(left, least), self._wake)
            try:
                await self._wait()
            finally:
                timer.cancel()
            least = _EARLY_WAIT_S  # woken before the deadline: an item, or an early timer
        return self._items.popleft()

    def close(self) -> None:
        """Closed: what is queued is dropped (it was for an episode that is over)."""
        self._closed = True
        self._items.clear()
        self._wake()

    def _wait(self) -> asyncio.Future[None]:
        self._waiter = self._loop.create_future()
        return self._waiter

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


@coroutine
def one_pass() -> Any:
    """Let the event loop run once: a bare yield schedules the task again at once."""
    yield


class TaskGroup:
    """asyncio's own task group, with anyio's ``start_soon``.

    On leaving with an error or a cancellation asyncio's group cancels its
    tasks natively, which would break a policy's shielded section: the
    episode first cancels the calls in flight through their anyio cancel
    scopes and waits for its actors with :meth:`wait_shielded`.
    """

    def __init__(self) -> None:
        self._group = asyncio.TaskGroup()
        self._tasks: list[asyncio.Task[Any]] = []

    async def __aenter__(self) -> TaskGroup:
        await self._group.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        await self._group.__aexit__(exc_type, exc, tb)  # raises what the tasks raised
        return None

    def start_soon(self, func: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        self._tasks.append(self._group.create_task(func(*args)))

    async def wait_shielded(self) -> None:
        """Wait, shielded from cancellation, until every task has ended."""
        pending = [task for task in self._tasks if not task.done()]
        if pending:
            with anyio.CancelScope(shield=True):
                await asyncio.wait(pending)
