"""The runtime's asyncio-native parts, in one place.

Why native: waiting through ``MemoryObjectReceiveStream.receive()`` costs a
checkpoint (a whole extra pass of the event loop) and an ``anyio.Event`` on
every blocking call, twice a turn; with instant policies that was most of a
turn. Here the reader waits on a bare future that the writer resolves, and a
deadline is a loop timer. Items still travel through the anyio stream, so
closing, bounds and errors are anyio's. Everything else runs on anyio.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

from anyio import WouldBlock

from ._mailbox import Mailbox

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


class AsyncioMailbox(Mailbox[T]):
    """:class:`~actors._mailbox.Mailbox` whose one reader waits on a bare future."""

    def __init__(self, size: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(size)
        self._loop = loop
        self._waiter: asyncio.Future[None] | None = None
        self.clock = turn_clock(loop)

    def put_nowait(self, item: T) -> None:
        super().put_nowait(item)
        self._wake()

    async def put(self, item: T) -> None:
        try:
            self.put_nowait(item)
        except WouldBlock:
            await self._send.send(item)
            self._wake()

    async def get(self) -> T:
        while True:
            try:
                return self._recv.receive_nowait()
            except WouldBlock:
                await self._wait()

    async def get_before(self, deadline: float) -> T | None:
        least = 0.0
        while True:
            try:
                return self._recv.receive_nowait()
            except WouldBlock:
                pass
            left = deadline - self.clock()
            if left <= 0:
                return None
            timer = self._loop.call_later(max(left, least), self._wake)
            try:
                await self._wait()
            finally:
                timer.cancel()
            least = _EARLY_WAIT_S  # woken before the deadline: an item, or an early timer

    def close(self) -> None:
        super().close()
        self._wake()

    def _wait(self) -> asyncio.Future[None]:
        self._waiter = self._loop.create_future()
        return self._waiter

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
