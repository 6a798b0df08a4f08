"""A bounded channel: an anyio memory object stream plus a cheap wake-up.

Items always travel through the stream (bounded, closable, one owner per end).
What this adds is the way an idle reader waits. ``MemoryObjectReceiveStream
.receive()`` pays for a checkpoint, an ``anyio.Event`` and a task lookup on
every blocking call (about 15 us on a small machine), which is most of a turn.
On asyncio the reader takes what is queued (``take``, ``receive_nowait``
underneath) and otherwise awaits a bare future (``waiter``) that the writer
resolves after ``send_nowait``, right in its own coroutine: no ``get``
coroutine in between to walk through at every resume. On other backends it
uses ``get()`` (``receive()``). Cancellation works the same either way
(awaiting a future is a cancellation point).

Waiting with a deadline on asyncio has no timer of its own: whoever owns the
deadline (the coordinator's one timer per episode) calls ``expire()``, which
sets ``expired`` and wakes the reader. No cancel scope, nothing to cancel, so
closing a turn costs the coordinator almost nothing. Other backends use
:meth:`Mailbox.get_before` (``move_on_after``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Generic, TypeVar

import anyio
from anyio import ClosedResourceError, WouldBlock
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

try:  # the state both ends share; building it directly skips a generic alias call
    from anyio.streams.memory import _MemoryObjectStreamState
except ImportError:  # pragma: no cover - another anyio layout
    _MemoryObjectStreamState = None

T = TypeVar("T")


def _memory_stream(size: int) -> tuple[MemoryObjectSendStream[Any], MemoryObjectReceiveStream[Any]]:
    """``anyio.create_memory_object_stream(size)`` without its argument checks (~2 us less)."""
    if _MemoryObjectStreamState is None:  # pragma: no cover
        return anyio.create_memory_object_stream(size)
    state = _MemoryObjectStreamState(size)
    return MemoryObjectSendStream(state), MemoryObjectReceiveStream(state)


def asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop, or None on another backend (e.g. trio)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class _Wakeable:
    """A single reader parked on a bare future, and the deadline flag that wakes it."""

    __slots__ = ("_waiter", "expired")

    _waiter: asyncio.Future[None] | None
    expired: bool

    def expire(self) -> None:
        """Set ``expired`` and wake the reader (a loop callback may call it)."""
        self.expired = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)


class Mailbox(_Wakeable, Generic[T]):
    """One reader, any number of writers in the same event loop."""

    __slots__ = ("_closed", "_count", "_loop", "_recv", "_send")

    def __init__(self, size: int, loop: asyncio.AbstractEventLoop | None) -> None:
        self._send, self._recv = _memory_stream(size)
        self._loop = loop
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        # Set by expire(), cleared by the reader when it starts a new wait.
        self.expired = False
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

    def put_latest(self, item: T) -> None:
        """Send ``item`` now, first dropping what is still queued if the buffer is full.

        For a sender that knows every queued item is stale (the coordinator:
        a request still in an actor's inbox is for a turn already closed).
        """
        send = self._send
        while True:
            try:
                send.send_nowait(item)
            except WouldBlock:
                try:
                    self._recv.receive_nowait()
                except WouldBlock:  # another backend's reader holds no count
                    pass
                else:
                    self._count -= 1
            else:
                break
        self._count += 1
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def get(self) -> T:
        """Next item; raises ``anyio.EndOfStream`` (or ``ClosedResourceError``) once closed."""
        if self._loop is None:
            return await self._recv.receive()
        while not self._count and not self._closed:
            await self.waiter()
        self._count -= 1
        return self._recv.receive_nowait()  # raises EndOfStream once closed and drained

    def take(self) -> T | None:
        """The next item if one is queued, else None (asyncio only; see :meth:`waiter`).

        None once closed, also with items still queued: they were for an
        episode that is over (a reader busy in a shielded call when it closed
        finds its stale request there).
        """
        if self._count and not self._closed:
            self._count -= 1
            return self._recv.receive_nowait()
        return None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def on_asyncio(self) -> bool:
        return self._loop is not None

    def waiter(self) -> asyncio.Future[None]:
        """A future that completes at the next put, close or expiry (asyncio only).

        ``await mailbox.waiter()`` right where the reader waits, instead of a
        ``get`` coroutine: one coroutine less to walk through on every resume.
        """
        assert self._loop is not None
        waiter = self._waiter = self._loop.create_future()
        return waiter

    async def get_before(self, deadline: float) -> T | None:
        """Next item, or None at ``deadline`` (``anyio.current_time()`` clock)."""
        with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
            return await self.get()
        return None

    def close(self) -> None:
        """Close both ends; a reader waiting in :meth:`get` wakes up and sees it."""
        self._closed = True
        self._send.close()
        self._recv.close()
        self._wake()


class Replies(_Wakeable, Generic[T]):
    """The coordinator's reply channel on asyncio: a queue and a bare future.

    The writers' side of :class:`Mailbox` (``try_put``, ``put``), and
    ``take`` / ``waiter`` / ``expire`` / ``close`` for the one reader (the
    coordinator). Unbounded, but it never holds more
    than the reply of the open turn: an actor replies only while its turn is
    open. Putting after :meth:`close` raises ``anyio.ClosedResourceError``, as
    a closed stream would.
    """

    __slots__ = ("_closed", "_items", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._items: deque[T] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self.expired = False

    def try_put(self, item: T) -> bool:
        """Queue ``item`` (always room); wakes the reader."""
        if self._closed:
            raise ClosedResourceError
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)
        return True

    async def put(self, item: T) -> None:
        self.try_put(item)

    def take(self) -> T | None:
        """The next item if one is queued, else None."""
        items = self._items
        return items.popleft() if items else None

    def waiter(self) -> asyncio.Future[None]:
        """A future that completes at the next put, close or :meth:`expire`.

        The reader (the coordinator) awaits it directly, then takes again: see
        ``expired`` for a wait with a deadline.
        """
        waiter = self._waiter = self._loop.create_future()
        return waiter

    def close(self) -> None:
        self._closed = True
        self._wake()
