"""Jobs on a Ray cluster: :func:`open_cluster_jobs` streams ``(index, result)``
as :func:`actors.open_jobs` does, with the jobs run by worker actors.

Each worker is an async Ray actor with its own event loop. It builds its job
once from a picklable ``make_job()`` (no live client crosses a process), runs
up to its share of the concurrency, and returns results with the log lines
its jobs wrote, each naming the worker. Work is handed out as a worker's slots
free up, never split up front: a slow worker takes fewer jobs. Jobs go in
chunks sized so that a call lasts 0.5 to 2 s (:data:`CALL_S`): quick jobs do
not pay a call's overhead each. A worker that
dies (its process killed, its node lost) has its unfinished jobs run again by
the others, and a new worker is started in its place where the cluster has
room; a job's result is delivered once.

Needs Ray (the ``ray`` extra). :func:`connect` joins a cluster, or starts one
on this machine on loopback only.
"""

from __future__ import annotations

import io
import logging
import math
import os
import socket
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

from . import _logging
from ._batch import JobResults
from ._gc import gc_frozen

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
            f"cannot reach the Ray cluster at {address}: {reason}; "
            "start one with `ray start --head`, or use --ray local"
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
    """One worker actor (made a Ray actor class by :func:`_actor_class`)."""

    def __init__(self, number: int, make_job: Callable[[], Any], log: dict[str, Any]) -> None:
        self.number = number
        self._make_job = make_job
        self._job: Any = None
        self._lines = _Lines()
        if log.get("level"):
            _logging.configure_logging(
                self._lines, pretty=False, level=log["level"], run_id=log.get("run_id")
            )

    async def run(self, chunk: list[tuple[int, Any]]) -> tuple[list[tuple[int, Any]], list[str]]:
        """Run a chunk of jobs at once; their ``(index, result)`` and the log lines."""
        import structlog

        if self._job is None:
            self._job = self._make_job()
        structlog.contextvars.bind_contextvars(worker=self.number)
        done: list[tuple[int, Any]] = []

        async def one(index: int, item: Any) -> None:
            done.append((index, await self._job(item)))

        with gc_frozen():  # as a local batch: collections stay short while jobs run
            async with anyio.create_task_group() as tg:
                for index, item in chunk:
                    tg.start_soon(one, index, item)
        return done, self._lines.take()

    def pid(self) -> int:
        return os.getpid()

    async def close(self) -> list[str]:
        """Close what the job holds (``aclose``), and return the last log lines."""
        close = getattr(self._job, "aclose", None)
        if close is not None:
            await close()
        return self._lines.take()


def _actor_class(ray: Any) -> Any:
    return ray.remote(num_cpus=1, max_restarts=0)(_Worker)


CALL_S = (0.5, 2.0)
"""A worker's calls are paced to last this long (seconds): chunks of jobs
grow while calls are shorter (a call's overhead outweighs quick jobs) and
shrink while longer (a chunk's slots free up only when its last job ends)."""


REPLACE_S = 30.0
"""How long a worker started in place of a dead one may take to come up (the
cluster may have no room left for it, its node lost): past it, it is given up."""


@dataclass
class _Pool:
    """The workers and what each is running: the dispatcher's state."""

    spawn: Callable[[int], Any]  # worker number -> a new worker actor
    slots: int
    actors: list[Any] = field(default_factory=list)
    busy: list[int] = field(default_factory=list)
    chunk: list[int] = field(default_factory=list)  # jobs per call, by worker
    dead: set[int] = field(default_factory=set)
    coming: int = 0  # workers starting in place of dead ones
    spare: int = 0  # how many more may be started so: one per worker asked for

    def add(self, actor: Any) -> None:
        self.actors.append(actor)
        self.busy.append(0)
        self.chunk.append(max(1, self.slots // 4))

    def free(self) -> Iterator[int]:
        """Workers with a free slot, least busy first."""
        alive = [w for w in range(len(self.actors)) if w not in self.dead]
        for worker in sorted(alive, key=lambda w: self.busy[w]):
            if self.busy[worker] < self.slots:
                yield worker

    def pace(self, worker: int, took_s: float) -> None:
        """The next chunk's size, from how long this call took (see CALL_S)."""
        low, high = CALL_S
        if took_s < low:
            self.chunk[worker] = min(self.chunk[worker] * 2, max(1, self.slots // 2))
        elif took_s > high:
            self.chunk[worker] = max(1, self.chunk[worker] // 2)

    async def replace(self, then: Callable[[], None]) -> None:
        """Start a worker in place of a dead one, if any may still be, then call
        ``then`` (to hand it work, or to find that none is left). One that does
        not come up within :data:`REPLACE_S` is given up."""
        if self.spare <= 0:
            return then()
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
        if ready:
            self.add(actor)
        then()


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
    actor = _actor_class(ray)
    on_lines = _logging.write_lines
    log = {"level": _logging.level_name(), "run_id": _logging.STATE.run_id}
    if not _logging.log_enabled(_logging.WARNING):
        log = {}
    pool = _Pool(lambda number: actor.remote(number, make_job, log),
                 slots=max(1, math.ceil(concurrency / count)))  # fmt: skip
    for number in range(count):
        pool.add(pool.spawn(number))
    pool.spare = count
    if on_pids is not None:
        on_pids(list(await _gather([a.pid.remote() for a in pool.actors])))
    send, receive = anyio.create_memory_object_stream[tuple[int, Any]](max(1, concurrency))
    results = JobResults(receive, n)
    queue: deque[int] = deque(range(n))
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_dispatch, pool, items, queue, results, send, on_lines, failed)
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
            await _stop(ray, pool, on_lines)


async def _dispatch(
    pool: _Pool,
    items: Sequence[Any],
    queue: deque[int],
    results: JobResults[Any],
    send: Any,
    on_lines: Callable[[list[str]], None] | None,
    failed: Callable[[Any], bool] | None,
) -> None:
    """Hand jobs to free workers as results come back, until all are in."""
    done = anyio.Event()
    remaining = [len(items)]

    async def call(tg: Any, worker: int, indices: list[int]) -> None:
        started = time.monotonic()
        try:
            chunk = [(index, items[index]) for index in indices]
            played, lines = await pool.actors[worker].run.remote(chunk)
        except Exception as exc:  # the worker died (RayActorError): run them elsewhere
            if not _worker_died(exc):
                raise
            pool.dead.add(worker)
            queue.extendleft(reversed(indices))
            results.started -= len(indices)
            tg.start_soon(pool.replace, lambda: fill(tg))
        else:
            pool.pace(worker, time.monotonic() - started)
            if on_lines is not None and lines:
                on_lines(lines)
            for index, result in played:
                results.finished += 1
                results.failed += bool(failed is not None and failed(result))
                remaining[0] -= 1
                await send.send((index, result))
        finally:
            pool.busy[worker] -= len(indices)
            results._running -= len(indices)
        fill(tg)

    def fill(tg: Any) -> None:
        if remaining[0] == 0:
            done.set()
            return
        if len(pool.dead) == len(pool.actors) and not pool.coming:
            raise ClusterError(f"every Ray worker died; {remaining[0]} job(s) not run")
        for worker in pool.free():
            while queue and pool.busy[worker] < pool.slots:
                size = min(pool.chunk[worker], pool.slots - pool.busy[worker], len(queue))
                indices = [queue.popleft() for _ in range(size)]
                pool.busy[worker] += size
                results.started += size
                results._running += size
                tg.start_soon(call, tg, worker, indices)

    async with send, anyio.create_task_group() as tg:
        fill(tg)
        await done.wait()
        tg.cancel_scope.cancel()  # a worker still starting is not needed any more


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
