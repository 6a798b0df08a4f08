"""What runs inside a Ray worker actor: an event loop of its own running up
to its share of the concurrency, and the log lines its jobs write, returned
with its results."""

from __future__ import annotations

import asyncio
import contextvars
import io
import os
from collections import deque
from collections.abc import Callable
from typing import Any, TextIO, cast

import structlog

from . import _logging
from ._gc import gc_frozen
from ._run import new_event_loop

RETURN_S = 0.1
"""A worker's call returns once it has lasted this long and a job finished, or
once it has nothing left to run: results reach the driver at that pace, and a
call's own cost stays small beside quick jobs'."""

CALL_MAX_S = 2.0
"""A call returns after this long even if no job finished: the driver hears
from every worker at least this often."""


class Lines(io.TextIOBase):
    """A text stream keeping the whole lines written to it, until taken."""

    def __init__(self) -> None:
        self._buffer = ""
        self._lines: list[str] = []

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._buffer += text
        if "\n" in self._buffer:
            *whole, self._buffer = self._buffer.split("\n")
            self._lines.extend(line for line in whole if line)
        return len(text)

    def take(self) -> list[str]:
        lines, self._lines = self._lines, []
        return lines


class JobWorker:
    """One worker actor (made a Ray actor class by :func:`actor_class`).

    A plain actor, not an async one (Ray makes an actor async when it has a
    coroutine method): its jobs run on an event loop of its own (uvloop when
    installed) that runs while a call lasts. An async actor runs each call on
    a second thread, which cost a tenth of a scripted episode's time. Jobs
    still running when a call returns go on in the next call, which the driver
    has already sent: the loop stands still only while Ray starts it.
    """

    def __init__(
        self, number: int, make_job: Callable[[], Any], log: dict[str, Any], slots: int
    ) -> None:
        self._lines = Lines()
        if log.get("level"):
            _logging.configure_logging(  # Lines writes lines as a text file does
                cast(TextIO, self._lines), pretty=False, level=log["level"],
                run_id=log.get("run_id"),
            )  # fmt: skip
        self._jobs = Jobs(number, make_job, slots)
        self._loop = new_event_loop()

    def run(self, jobs: list[tuple[int, Any]]) -> tuple[list[tuple[int, Any]], list[str]]:
        """Take ``jobs`` and run what this worker holds until some finished
        (see :data:`RETURN_S`); their ``(index, result)`` and the log lines."""
        with gc_frozen():  # as a local batch: collections stay short while jobs run
            played = self._loop.run_until_complete(self._jobs.call(jobs))
        return played, self._lines.take()

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> list[str]:
        """Cancel the jobs still running, close what the job holds (``aclose``),
        and return the last log lines."""
        self._loop.run_until_complete(self._jobs.close())
        self._loop.close()
        return self._lines.take()


class Jobs:
    """A worker's jobs on its event loop: up to ``slots`` at once, the others
    waiting their turn, the results kept until a call takes them."""

    def __init__(self, number: int, make_job: Callable[[], Any], slots: int) -> None:

        self._make_job = make_job
        self._job: Any = None
        self._slots = slots
        self._waiting: deque[tuple[int, Any]] = deque()
        self._running: set[asyncio.Task[None]] = set()
        self._finished: list[tuple[int, Any]] = []
        self._error: Exception | None = None
        self._wake: asyncio.Future[None] | None = None
        self._context = contextvars.copy_context()  # each job's log lines name the worker
        self._context.run(structlog.contextvars.bind_contextvars, worker=number)

    async def call(self, jobs: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
        """Start ``jobs``, then run until :data:`RETURN_S` has passed and some
        job finished (or none is left); what finished."""
        if self._job is None:
            self._job = self._make_job()
        loop = asyncio.get_running_loop()
        self._waiting.extend(jobs)
        self._start()
        now = loop.time()
        soonest, latest = now + RETURN_S, now + CALL_MAX_S
        while self._running and self._error is None:
            now = loop.time()
            if now >= latest or (self._finished and now >= soonest):
                break
            self._wake = loop.create_future()
            timer = loop.call_at(soonest if self._finished else latest, self._ring)
            try:
                await self._wake
            finally:
                timer.cancel()
        if self._error is not None:
            raise self._error
        played, self._finished = self._finished, []
        return played

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        while self._waiting and len(self._running) < self._slots and self._error is None:
            index, item = self._waiting.popleft()
            coro = self._one(index, item)
            self._running.add(loop.create_task(coro, context=self._context.copy()))

    async def _one(self, index: int, item: Any) -> None:
        try:
            result = await self._job(item)
        except Exception as exc:  # the call raises it: a job's own failure is a result
            self._error = self._error or exc
        else:  # the list of the call running now, not of the one that started the job
            self._finished.append((index, result))
        finally:
            self._running.discard(asyncio.current_task())
            self._start()
            if len(self._finished) == 1 or not self._running or self._error is not None:
                self._ring()

    def _ring(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def close(self) -> None:
        for task in self._running:
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)
        close = getattr(self._job, "aclose", None)
        if close is not None:
            await close()


def actor_class(ray: Any) -> Any:
    return ray.remote(num_cpus=1, max_restarts=0)(JobWorker)
