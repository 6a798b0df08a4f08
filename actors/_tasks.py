"""The task group the runtime uses: native on asyncio, anyio's elsewhere."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any

import anyio

from ._mailbox import asyncio_loop


class TaskGroup:
    """Structured tasks for the runtime's hot paths (episodes' actors, batch workers).

    On asyncio a native ``asyncio.TaskGroup``: anyio's wraps every task in a
    coroutine of its own (and a handle with a cancel scope and an event), which
    costs about four times as much to start and is one more level each resume
    of the task walks through, twice a turn for a batch worker running an
    episode. Elsewhere (trio) anyio's task group. Either way the group awaits
    every task on exit and cancels the others when one fails.

    ``tasks`` lists the tasks started on asyncio (empty elsewhere);
    :meth:`cancel` cancels what is still running.
    """

    __slots__ = ("_group", "native", "tasks")

    def __init__(self) -> None:
        self.native = asyncio_loop() is not None
        self._group: Any = asyncio.TaskGroup() if self.native else anyio.create_task_group()
        self.tasks: list[asyncio.Task[Any]] = []

    async def __aenter__(self) -> TaskGroup:
        await self._group.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        return await self._group.__aexit__(exc_type, exc, tb)

    def start_soon(self, func: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Start ``func(*args)`` as a task of the group."""
        if self.native:
            self.tasks.append(self._group.create_task(func(*args)))
        else:
            self._group.start_soon(func, *args)

    def cancel(self) -> None:
        """Cancel the tasks still running (natively on asyncio)."""
        if self.native:
            for task in self.tasks:
                task.cancel()
        else:
            self._group.cancel_scope.cancel()
