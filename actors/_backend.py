"""What an episode waits with, chosen once when it starts: asyncio's own
primitives when it runs on asyncio (a turn costs markedly less), anyio's on
any other backend. Both kinds of mailbox keep to :class:`Inbox`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import anyio
import anyio.lowlevel

from ._asyncio import AsyncioMailbox, TaskGroup, one_pass, running_loop, turn_clock
from ._mailbox import Mailbox

T = TypeVar("T")


class Inbox(Protocol[T]):
    """A bounded channel with one reader: what actors and their coordinator use."""

    clock: Callable[[], float]  # the clock deadlines are on

    def put_nowait(self, item: T) -> None: ...

    async def put(self, item: T) -> None: ...

    def put_latest(self, item: T) -> None: ...

    def take(self) -> T | None: ...

    async def get(self) -> T: ...

    async def get_before(self, deadline: float) -> T | None: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Backend:
    """An episode's way of waiting: its mailboxes, its actors' task group, one
    pass of the event loop, and how it waits for cancelled calls to end."""

    on_asyncio: bool
    mailbox: Callable[[int], Inbox[Any]]
    task_group: Callable[[], Any]
    one_pass: Callable[[], Awaitable[Any]]

    async def settle(self, tasks: Any) -> None:
        """After the calls in flight were cancelled through their own scopes,
        wait for the actors to end (asyncio's group would otherwise cancel them
        natively, through a policy's shielded section); anyio's group waits itself."""
        if self.on_asyncio:
            await tasks.wait_shielded()


def current_backend() -> Backend:
    """The backend of the running event loop."""
    loop = running_loop()
    if loop is None:
        return Backend(False, Mailbox, anyio.create_task_group, anyio.lowlevel.checkpoint)
    clock = turn_clock(loop)
    return Backend(True, lambda size: AsyncioMailbox(size, loop, clock), TaskGroup, one_pass)
