"""Jobs on a Ray cluster: :func:`open_cluster_jobs` streams ``(index, result)``
as :func:`actors.open_jobs` does, with the jobs run by worker actors.

Each worker is a Ray actor running its jobs on an event loop of its own. It
builds its job once from a picklable ``make_job()`` (no live client crosses a
process), runs up to its share of the concurrency at once, and returns
results with the log lines its jobs wrote, each naming the worker. Work is
handed out as a worker has room, never split up front: a worker holds its
share of the concurrency and as many jobs again as it finished in its last
call, so a slow worker takes fewer. A call returns what finished about every
:data:`RETURN_S`: quick jobs do not pay a call's overhead each. A worker that
dies (its process killed, its node lost) has its unfinished jobs run again by
the others, and a new worker is started in its place where the cluster has
room; a job's result is delivered once.

Needs Ray (the ``ray`` extra). :func:`connect` joins a cluster, or starts one
on this machine on loopback only.
"""

from __future__ import annotations

import asyncio
import contextvars
import io
import logging
import math
import os
import socket
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO, cast

import anyio
import structlog

from . import _logging
from ._batch import JobResults
from ._gc import gc_frozen
from ._run import new_event_loop

__all__ = [
    "ClusterError",
    "ClusterOptions",
    "RayMissing",
    "connect",
    "import_ray",
    "open_cluster_jobs",
]

RAY_MISSING = "Ray is not installed: install the 'ray' extra (pip install -e '.[ray]')"


class RayMissing(ImportError):
    """Ray cannot be imported."""


class ClusterError(RuntimeError):
    """The cluster cannot be reached or used; the message is one line."""


@dataclass(frozen=True)
class ClusterOptions:
    """Where to run: ``address`` ``local`` (a Ray instance for this run, on
    loopback), ``auto`` or ``HOST:PORT`` (a running cluster); ``workers`` (None:
    one per CPU of the cluster)."""

    address: str = "local"
    workers: int | None = None


def import_ray() -> Any:
    try:
        # the ray extra
        import ray
    except ImportError:
        raise RayMissing(RAY_MISSING) from None
    return ray


@contextmanager
def connect(address: str) -> Iterator[Any]:
    """This process connected to Ray for the block (the ``ray`` module).

    ``local`` starts an instance on 127.0.0.1 only and stops it after; ``auto``
    or ``HOST:PORT`` joins a running cluster (``ray start --head``), checked
    to answer first: Ray itself retries an unreachable address for minutes.
    """
    ray = import_ray()
    if address == "local":
        # every node on 127.0.0.1: by default Ray binds to the machine's address
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        _init(ray, address, include_dashboard=False)
    else:
        if address != "auto":
            _check_reachable(address)
        _init(ray, address, address=address)
    try:
        yield ray
    finally:
        ray.shutdown()


def _init(ray: Any, where: str, **options: Any) -> None:
    try:
        ray.init(log_to_driver=False, logging_level=logging.ERROR, **options)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        text = " ".join(str(exc).split())
        raise ClusterError(f"cannot use the Ray cluster at {where}: {text[:300]}") from None


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(
            f"Ray address {address!r}: expected local, auto or HOST:PORT (the head's GCS port)"
        )
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ClusterError(
            f"cannot reach the Ray cluster at {address}: {reason} (a head is started "
            "with `ray start --head`)"
        ) from None


class _Lines(io.TextIOBase):
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


class _Worker:
    """One worker actor (made a Ray actor class by :func:`_actor_class`).

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
        self._lines = _Lines()
        if log.get("level"):
            _logging.configure_logging(  # _Lines writes lines as a text file does
                cast(TextIO, self._lines), pretty=False, level=log["level"],
                run_id=log.get("run_id"),
            )  # fmt: skip
        self._jobs = _Jobs(number, make_job, slots)
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


class _Jobs:
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


def _actor_class(ray: Any) -> Any:
    return ray.remote(num_cpus=1, max_restarts=0)(_Worker)


RETURN_S = 0.1
"""A worker's call returns once it has lasted this long and a job finished, or
once it has nothing left to run: results reach the driver at that pace, and a
call's own cost stays small beside quick jobs'."""

CALL_MAX_S = 2.0
"""A call returns after this long even if no job finished: the driver hears
from every worker at least this often."""

REPLACE_S = 30.0
"""How long a worker started in place of a dead one may take to come up (the
cluster may have no room left for it, its node lost): past it, it is given up."""


@dataclass
class _Work:
    """The jobs not handed out yet, and how many have still to come back."""

    queue: deque[int]
    remaining: int
    changed: anyio.Event = field(default_factory=anyio.Event)

    def take(self, count: int) -> list[int]:
        return [self.queue.popleft() for _ in range(min(count, len(self.queue)))]

    def give_back(self, indices: Iterable[int]) -> None:
        """Jobs of a dead worker, first in line again."""
        self.queue.extendleft(reversed(list(indices)))
        self._notify()

    def came_back(self, count: int) -> None:
        self.remaining -= count
        if self.remaining == 0:
            self._notify()

    async def wait(self) -> bool:
        """Until there are jobs to take (True) or none still to come back (False)."""
        while not self.queue and self.remaining:
            await self.changed.wait()
        return bool(self.queue)

    async def all_back(self) -> None:
        """Until every job has come back."""
        while self.remaining:
            await self.changed.wait()

    def _notify(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()


@dataclass
class _Pool:
    """The workers: who is alive, and how many jobs each is given."""

    spawn: Callable[[int], Any]  # worker number -> a new worker actor
    slots: int  # a worker's jobs at once
    actors: list[Any] = field(default_factory=list)
    held: list[dict[int, None]] = field(default_factory=list)  # each one's jobs not back yet
    ahead: list[int] = field(default_factory=list)  # what each may hold beyond its slots
    dead: set[int] = field(default_factory=set)
    coming: int = 0  # workers starting in place of dead ones
    spare: int = 0  # how many more may be started so: one per worker asked for

    def add(self, actor: Any) -> int:
        self.actors.append(actor)
        self.held.append({})
        self.ahead.append(self.slots)
        return len(self.actors) - 1

    def room(self, worker: int) -> int:
        """How many more jobs ``worker`` may be given: its slots, and as many
        again as it finished in its last call, to start as slots free up
        between calls (a slow worker finishes fewer, and gets fewer)."""
        return self.slots + self.ahead[worker] - len(self.held[worker])

    def running(self) -> int:
        return sum(min(len(held), self.slots) for held in self.held)

    def all_dead(self) -> bool:
        return len(self.dead) == len(self.actors) and not self.coming

    async def replace(self) -> int | None:
        """A worker started in place of a dead one (its number), if one may
        still be and comes up within :data:`REPLACE_S`; else None."""
        if self.spare <= 0:
            return None
        ray = import_ray()
        self.spare -= 1
        actor = self.spawn(len(self.actors) + self.coming)  # the next worker number
        self.coming += 1
        ready = False
        try:
            with anyio.move_on_after(REPLACE_S):
                await actor.pid.remote()
                ready = True
        except Exception as exc:  # it died too: the others go on
            if not _worker_died(exc):
                raise
        finally:
            self.coming -= 1
            if not ready:
                ray.kill(actor, no_restart=True)
        return self.add(actor) if ready else None


@asynccontextmanager
async def open_cluster_jobs(
    items: Sequence[Any],
    make_job: Callable[[], Any],
    *,
    workers: int,
    concurrency: int,
    failed: Callable[[Any], bool] | None = None,
    on_pids: Callable[[list[int]], None] | None = None,
) -> AsyncIterator[JobResults[Any]]:
    """Run ``make_job()(item)`` for each item on ``workers`` worker actors of
    the connected cluster, ``concurrency`` jobs at once in all (shared out
    evenly); yields a :class:`JobResults` of ``(index, result)`` as they finish.

    The workers log as this process is configured to (level and run id), each
    line naming its ``worker``; their lines come back with the results and go
    to this process's log target. ``on_pids`` gets the workers' process ids
    once they are up. Leaving the block cancels the jobs still running and
    stops the workers.
    """
    ray = import_ray()
    n = len(items)
    count = max(1, min(workers, n or 1))
    slots = max(1, math.ceil(concurrency / count))
    actor = _actor_class(ray)
    log = {"level": _logging.level_name(), "run_id": _logging.STATE.run_id}
    if not _logging.log_enabled(_logging.WARNING):
        log = {}
    pool = _Pool(lambda number: actor.remote(number, make_job, log, slots), slots)
    for number in range(count):
        pool.add(pool.spawn(number))
    pool.spare = count
    if on_pids is not None:
        on_pids(list(await _gather([a.pid.remote() for a in pool.actors])))
    # never full: a worker's call goes on while the results wait to be read
    send, receive = anyio.create_memory_object_stream[tuple[int, Any]](math.inf)
    results = JobResults(receive, n)
    feed = _Feed(pool, items, _Work(deque(range(n)), n), results, send, failed, concurrency)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(feed.all)
            async with receive:
                yield results
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:  # every worker died: one error, not a group
        lost = group.subgroup(ClusterError)
        if lost is None:
            raise
        raise _first(lost) from None
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(ray, pool, _logging.write_lines)


@dataclass
class _Feed:
    """Keeps calls going on each live worker, handing it jobs as it has room,
    and hands the results on; a dead worker's jobs go back in line.

    While more results wait to be read than the workers hold, plus
    ``backlog``, no job is handed out; but the calls go on, so the jobs
    running finish within their deadlines (a worker's loop runs only while a
    call lasts)."""

    pool: _Pool
    items: Sequence[Any]
    work: _Work
    results: JobResults[Any]
    send: Any  # the results' memory stream
    failed: Callable[[Any], bool] | None
    backlog: int

    async def all(self) -> None:
        async with self.send, anyio.create_task_group() as tg:
            for worker in range(len(self.pool.actors)):
                tg.start_soon(self.worker, worker)

    async def worker(self, worker: int | None) -> None:
        """Feed ``worker``, then whoever takes its place when it dies."""
        while worker is not None:
            try:
                return await self._feed(worker)
            except Exception as exc:  # the worker died (RayActorError): run them elsewhere
                if not _worker_died(exc):
                    raise
            self._lost(worker)
            worker = await self._replacement()
        if self.pool.all_dead() and self.work.remaining:
            raise ClusterError(f"every Ray worker died; {self.work.remaining} job(s) not run")

    async def _replacement(self) -> int | None:
        """A worker started in place of a dead one (its number), or None: none
        could be, or every job came back first (the others ran them all, and
        waiting for a worker with nothing left to do would only hold the run up)."""
        replaced = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._cancel_when_all_back, tg.cancel_scope)
            replaced = await self.pool.replace()
            tg.cancel_scope.cancel()
        return replaced

    async def _cancel_when_all_back(self, scope: anyio.CancelScope) -> None:
        await self.work.all_back()
        scope.cancel()

    async def _feed(self, worker: int) -> None:
        held = self.pool.held[worker]
        calls: deque[Any] = deque()
        while True:
            # two calls in line: the worker starts the second as the first
            # returns, so its loop (and its turns' deadlines) never waits on us
            while len(calls) < 2 and (held or (self.work.queue and not self._backed_up())):
                calls.append(self._send(worker))
            if not calls:
                if self._backed_up():
                    await anyio.sleep(RETURN_S)  # until the results are read
                elif not await self.work.wait():
                    return  # every job is back
                continue
            played, lines = await calls.popleft()
            for index, _ in played:
                del held[index]
            self.pool.ahead[worker] = max(1, len(played))
            self._hand_on(played, lines)

    def _send(self, worker: int) -> Any:
        taken = [] if self._backed_up() else self.work.take(self.pool.room(worker))
        self.pool.held[worker].update(dict.fromkeys(taken))
        self.results.started += len(taken)
        self.results._running = self.pool.running()
        return self.pool.actors[worker].run.remote([(i, self.items[i]) for i in taken])

    def _hand_on(self, played: list[tuple[int, Any]], lines: list[str]) -> None:
        if lines:
            _logging.write_lines(lines)
        self.results._running = self.pool.running()
        for index, result in played:
            self.results.finished += 1
            self.results.failed += bool(self.failed is not None and self.failed(result))
            self.send.send_nowait((index, result))
        self.work.came_back(len(played))

    def _backed_up(self) -> bool:
        unread = self.send.statistics().current_buffer_used
        return unread > sum(map(len, self.pool.held)) + self.backlog

    def _lost(self, worker: int) -> None:
        held, self.pool.held[worker] = self.pool.held[worker], {}
        self.pool.dead.add(worker)
        self.results.started -= len(held)
        self.results._running = self.pool.running()
        self.work.give_back(held)


def _first(group: BaseExceptionGroup[Any]) -> BaseException:
    inner = group.exceptions[0]
    return _first(inner) if isinstance(inner, BaseExceptionGroup) else inner


def _worker_died(exc: BaseException) -> bool:
    ray = import_ray()
    return isinstance(exc, ray.exceptions.RayActorError)


async def _gather(refs: list[Any]) -> list[Any]:
    return [await ref for ref in refs]


async def _stop(ray: Any, pool: _Pool, on_lines: Callable[[list[str]], None] | None) -> None:
    """Close each live worker's job and stop the workers."""
    for number, actor in enumerate(pool.actors):
        if number not in pool.dead:
            try:
                with anyio.fail_after(10):
                    lines = await actor.close.remote()
                if on_lines is not None and lines:
                    on_lines(lines)
            except Exception:  # stopping anyway: the actor is killed below
                pass
        ray.kill(actor, no_restart=True)
