"""The driver's side of jobs on a Ray cluster: the jobs handed out as each
worker has room, the results handed on as they come back, a dead worker's
jobs run again by the others and a worker started in its place."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

from . import _logging
from ._batch import JobCounts, JobResults, log_finished, start_batch
from ._cluster_connect import ClusterError, import_ray
from ._cluster_worker import RETURN_S, actor_class

REPLACE_S = 30.0
"""How long a worker started in place of a dead one may take to come up (the
cluster may have no room left for it, its node lost): past it, it is given up."""


@dataclass
class Work:
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
class Pool:
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
        number = len(self.actors) + self.coming  # the next worker number
        actor = self.spawn(number)
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
        _log_replacement(number, ready)
        return self.add(actor) if ready else None


def _log_replacement(number: int, ready: bool) -> None:
    """Say what became of a worker started in place of a dead one: up (and
    taking jobs), or given up, the others going on without it."""
    if ready and _logging.log_enabled(_logging.INFO):
        _logging.get_logger().info("worker_replaced", worker=number)
    elif not ready:
        _logging.get_logger().warning("worker_not_replaced", worker=number, within_s=REPLACE_S)


@asynccontextmanager
async def open_cluster_jobs(
    items: Sequence[Any],
    make_job: Callable[[], Any],
    *,
    workers: int,
    concurrency: int,
    failed: Callable[[Any], bool] | None = None,
    on_pids: Callable[[list[int]], None] | None = None,
    log_fields: Mapping[str, Any] | None = None,
) -> AsyncIterator[JobResults[Any]]:
    """Run ``make_job()(item)`` for each item on ``workers`` worker actors of
    the connected cluster, ``concurrency`` jobs at once in all (shared out
    evenly); yields a :class:`JobResults` of ``(index, result)`` as they finish.

    The workers log as this process is configured to (level and run id), each
    line naming its ``worker``; their lines come back with the results and go
    to this process's log target. ``on_pids`` gets the workers' process ids
    once they are up. Leaving the block cancels the jobs still running and
    stops the workers. Logs ``run_started`` (with ``log_fields``) and
    ``run_finished`` as a local batch does, and counts the planned episodes
    in this process's metrics.
    """
    ray = import_ray()
    items, _, begun = start_batch(items, concurrency, log_fields)
    n = len(items)
    count = max(1, min(workers, n or 1))
    slots = max(1, math.ceil(concurrency / count))
    actor = actor_class(ray)
    log = {"level": _logging.level_name(), "run_id": _logging.STATE.run_id}
    if not _logging.log_enabled(_logging.WARNING):
        log = {}
    pool = Pool(lambda number: actor.remote(number, make_job, log, slots), slots)
    for number in range(count):
        pool.add(pool.spawn(number))
    pool.spare = count
    if on_pids is not None:
        on_pids(list(await _gather([a.pid.remote() for a in pool.actors])))
    # never full: a worker's call goes on while the results wait to be read
    send, receive = anyio.create_memory_object_stream[tuple[int, Any]](math.inf)
    results = JobResults(receive, n)
    counts = JobCounts(results, failed)
    feed = Feed(pool, items, Work(deque(range(n)), n), counts, send, concurrency)
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
        log_finished(results.finished, results.failed, begun)


@dataclass
class Feed:
    """Keeps calls going on each live worker, handing it jobs as it has room,
    and hands the results on; a dead worker's jobs go back in line.

    While more results wait to be read than the workers hold, plus
    ``backlog``, no job is handed out; but the calls go on, so the jobs
    running finish within their deadlines (a worker's loop runs only while a
    call lasts)."""

    pool: Pool
    items: Sequence[Any]
    work: Work
    counts: JobCounts  # the results' counters
    send: Any  # the results' memory stream
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
        self.counts.started(len(taken))
        self.counts.running(self.pool.running())
        return self.pool.actors[worker].run.remote([(i, self.items[i]) for i in taken])

    def _hand_on(self, played: list[tuple[int, Any]], lines: list[str]) -> None:
        if lines:
            _logging.write_lines(lines)
        self.counts.running(self.pool.running())
        for index, result in played:
            self.counts.finished(result)
            self.send.send_nowait((index, result))
        self.work.came_back(len(played))

    def _backed_up(self) -> bool:
        unread = self.send.statistics().current_buffer_used
        return unread > sum(map(len, self.pool.held)) + self.backlog

    def _lost(self, worker: int) -> None:
        held, self.pool.held[worker] = self.pool.held[worker], {}
        self.pool.dead.add(worker)
        self.counts.unstarted(len(held))
        self.counts.running(self.pool.running())
        self.work.give_back(held)


def _first(group: BaseExceptionGroup[Any]) -> BaseException:
    inner = group.exceptions[0]
    return _first(inner) if isinstance(inner, BaseExceptionGroup) else inner


def _worker_died(exc: BaseException) -> bool:
    ray = import_ray()
    return isinstance(exc, ray.exceptions.RayActorError)


async def _gather(refs: list[Any]) -> list[Any]:
    return [await ref for ref in refs]


async def _stop(ray: Any, pool: Pool, on_lines: Callable[[list[str]], None] | None) -> None:
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
