"""Channels between an episode's coordinator and its actors.

A :class:`Mailbox` is an anyio memory object stream (bounded, closable) with
one reader. The reader waits with :meth:`Mailbox.get`, or with
:meth:`Mailbox.get_before` until a deadline. On asyncio the episode uses
:class:`actors._asyncio.AsyncioMailbox`, the same interface over a deque and
a bare future (see there why); the episode picks the kind once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import anyio
from anyio import WouldBlock

T = TypeVar("T")


class Mailbox(Generic[T]):
    """One reader, any number of writers, ``size`` items at most."""

    def __init__(self, size: int) -> None:
        self._send, self._recv = anyio.create_memory_object_stream[T](size)
        self.clock: Callable[[], float] = anyio.current_time  # what deadlines are on

    def put_nowait(self, item: T) -> None:
        """Queue ``item``; ``anyio.WouldBlock`` when full, ``ClosedResourceError`` once closed."""
        self._send.send_nowait(item)

    async def put(self, item: T) -> None:
        """Queue ``item``, waiting for room when full."""
        await self._send.send(item)

    def put_latest(self, item: T) -> None:
        """Queue ``item``, first dropping what is queued if the mailbox is full.

        For a writer that knows every queued item is stale (the coordinator: a
        request still in an actor's inbox is for a turn already closed).
        """
        while True:
            try:
                return self.put_nowait(item)
            except WouldBlock:
                self._recv.receive_nowait()

    def take(self) -> T | None:
        """The next item if one is queued now, else None."""
        try:
            return self._recv.receive_nowait()
        except WouldBlock:
            return None

    async def get(self) -> T:
        """The next item; raises ``anyio.EndOfStream`` (or ``ClosedResourceError``) once closed."""
        return await self._recv.receive()

    async def get_before(self, deadline: float) -> T | None:
        """The next item, or None at ``deadline`` (on ``anyio.current_time()``'s clock)."""
        with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
            return await self.get()
        return None

    def close(self) -> None:
        """Close both ends: the reader's :meth:`get` raises, writers' puts raise."""
        self._send.close()
        self._recv.close()
