"""A bounded channel: an anyio memory object stream plus a cheap wake-up.

Items always travel through the stream (bounded, closable, one owner per end).
What this adds is the way an idle reader waits. ``MemoryObjectReceiveStream
.receive()`` pays for a checkpoint, an ``anyio.Event`` and a task lookup on
every blocking call (about 15 us on a small machine), which is most of a turn.
On asyncio the reader instead parks on a bare future that the writer resolves
after ``send_nowait``, then takes the item with ``receive_nowait``; on other
backends it falls back to ``receive()``. Cancellation works the same either
way (awaiting a future is a cancellation point).
"""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

import anyio
import sniffio
from anyio import WouldBlock

T = TypeVar("T")


def asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop, or None on another backend."""
    try:
        if sniffio.current_async_library() != "asyncio":
            return None
    except sniffio.AsyncLibraryNotFoundError:
        return None
    return asyncio.get_running_loop()


class Mailbox(Generic[T]):
    """One reader, any number of writers in the same event loop."""

    __slots__ = ("_loop", "_recv", "_send", "_waiter")

    def __init__(self, size: int, loop: asyncio.AbstractEventLoop | None) -> None:
        self._send, self._recv = anyio.create_memory_object_stream[T](size)
        self._loop = loop
        self._waiter: asyncio.Future[None] | None = None

    async def put(self, item: T) -> None:
        """Send ``item``, waiting for room only when the buffer is full."""
        try:
            self._send.send_nowait(item)
        except WouldBlock:
            await self._send.send(item)
        self._wake()

    async def get(self) -> T:
        """Next item; raises ``anyio.EndOfStream`` once closed and drained."""
        while True:
            try:
                return self._recv.receive_nowait()
            except WouldBlock:
                if self._loop is None:
                    return await self._recv.receive()
                waiter = self._waiter = self._loop.create_future()
                await waiter

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def close(self) -> None:
        """Close both ends, once no task uses the mailbox any more."""
        self._send.close()
        self._wake()
        self._recv.close()
