"""A bounded channel: an anyio memory object stream plus a cheap wake-up.

Items always travel through the stream (bounded, closable, one owner per end).
What this adds is the way an idle reader waits. ``MemoryObjectReceiveStream
.receive()`` pays for a checkpoint, an ``anyio.Event`` and a task lookup on
every blocking call (about 15 us on a small machine), which is most of a turn.
On asyncio the reader instead parks on a bare future that the writer resolves
after ``send_nowait``, then takes the item with ``receive_nowait``; on other
backends it falls back to ``receive()``. Cancellation works the same either
way (awaiting a future is a cancellation point).

Waiting with a deadline (:meth:`Mailbox.get_before`) uses a loop timer that
only wakes the reader: no cancel scope, nothing to cancel, so closing a turn
at its deadline costs the coordinator almost nothing.
"""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

import anyio
from anyio import WouldBlock

T = TypeVar("T")


def asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop, or None on another backend (e.g. trio)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Mailbox(Generic[T]):
    """One reader, any number of writers in the same event loop."""

    __slots__ = ("_closed", "_count", "_expired", "_loop", "_recv", "_send", "_waiter")

    def __init__(self, size: int, loop: asyncio.AbstractEventLoop | None) -> None:
        self._send, self._recv = anyio.create_memory_object_stream(size)
        self._loop = loop
        self._waiter: asyncio.Future[None] | None = None
        self._expired = False
        self._closed = False
        # Items known to be in the buffer: on asyncio every item goes through
        # the buffer (the reader never waits in receive()), so the reader can
        # skip receive_nowait() when it would raise WouldBlock.
        self._count = 0

    def try_put(self, item: T) -> bool:
        """Send ``item`` if there is room now; False if the buffer is full."""
        try:
            self._send.send_nowait(item)
        except WouldBlock:
            return False
        self._count += 1
        self._wake()
        return True

    async def put(self, item: T) -> None:
        """Send ``item``, waiting for room only when the buffer is full."""
        try:
            self._send.send_nowait(item)
        except WouldBlock:
            await self._send.send(item)
        self._count += 1
        self._wake()

    async def get(self) -> T:
        """Next item; raises ``anyio.EndOfStream`` (or ``ClosedResourceError``) once closed."""
        loop = self._loop
        if loop is None:
            return await self._recv.receive()
        while True:
            if self._count or self._closed:
                item = self._recv.receive_nowait()
                self._count -= 1
                return item
            waiter = self._waiter = loop.create_future()
            await waiter

    async def get_before(self, deadline: float) -> T:
        """Next item, or ``TimeoutError`` at ``deadline`` (``anyio.current_time()`` clock)."""
        loop = self._loop
        if loop is None:
            with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
                return await self._recv.receive()
            raise TimeoutError
        self._expired = False
        timer = loop.call_at(deadline, self._expire)
        try:
            while True:
                if self._count or self._closed:
                    item = self._recv.receive_nowait()
                    self._count -= 1
                    return item
                if self._expired:
                    raise TimeoutError
                waiter = self._waiter = loop.create_future()
                await waiter
        finally:
            timer.cancel()

    def _expire(self) -> None:
        self._expired = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def close(self) -> None:
        """Close both ends; a reader waiting in :meth:`get` wakes up and sees it."""
        self._closed = True
        self._send.close()
        self._recv.close()
        self._wake()
