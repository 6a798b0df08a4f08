"""Bounded-concurrency batches of jobs (typically episodes)."""

from __future__ import annotations

from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager, contextmanager
from time import perf_counter
from typing import Any, Generic, TypeVar, cast

import anyio
import anyio.lowlevel
from anyio import EndOfStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from . import _logging, _metrics
from ._asyncio import running_loop
from ._gate import CURRENT_GATE, HOT_EPISODES, TurnGate
from ._gc import gc_frozen

T = TypeVar("T")
R = TypeVar("R")


def _check(concurrency: int) -> None:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an integer >= 1, got {concurrency!r}")


def start_batch(
    items: Iterable[T], concurrency: int, log_fields: Mapping[str, Any] | None
) -> tuple[Sequence[T], Iterator[int], float]:
    """Check ``concurrency``, list the items once, log ``run_started``.

    Returns the items, the cursor the workers share (each index is taken by
    exactly one worker) and the start time.
    """
    _check(concurrency)
    seq: Sequence[T] = items if isinstance(items, Sequence) else list(items)
    meter = _metrics.STATE.meter
    if meter is not None:
        meter.planned(len(seq), log_fields)
    if _logging.log_enabled(_logging.INFO):
        _logging.get_logger().info(
            "run_started", episodes=len(seq), concurrency=concurrency, **(log_fields or {})
        )
    return seq, iter(range(len(seq))), perf_counter()


def log_finished(n: int, failed: int, started: float) -> None:
    if _logging.log_enabled(_logging.INFO):
        _logging.get_logger().info(
            "run_finished", episodes=n, failed=failed, wall_s=round(perf_counter() - started, 6)
        )


@contextmanager
def _turn_gate() -> Iterator[None]:
    """A new :class:`TurnGate` for the batch's episodes while the block runs.

    On asyncio only: elsewhere an instant reply is not there after one pass of
    the loop, so playing turns back to back gains nothing.
    """
    if running_loop() is None:
        yield
        return
    token = CURRENT_GATE.set(TurnGate(HOT_EPISODES))
    try:
        yield
    finally:
        try:
            CURRENT_GATE.reset(token)
        except ValueError:  # closed from another context (a stream left to the collector)
            pass


async def _start_workers(count: int, spawn: Callable[[], object]) -> None:
    """Call ``spawn()`` ``count`` times, one per event-loop iteration.

    Each worker starts its first job at once (an episode's reset and first
    request); starting them all in one go would hold every timer and wake-up
    already due behind the whole burst (the first turns of 1,000 episodes
    waited ~0.2 s). Yielding in between lets the jobs already running go on.
    """
    for i in range(count):
        spawn()
        if i + 1 < count:
            await anyio.lowlevel.checkpoint()


async def run_jobs(
    items: Iterable[T],
    job: Callable[[T], Awaitable[R]],
    *,
    concurrency: int,
    failed: Callable[[R], bool] | None = None,
    log_fields: Mapping[str, Any] | None = None,
    gc_freeze: bool = False,
) -> list[R]:
    """Run ``job(item)`` for every item, at most ``concurrency`` at a time.

    Results come in the order of ``items``. ``min(concurrency, len(items))``
    worker tasks pull the next index from a shared cursor, so memory does not
    grow with the number of items beyond the results themselves; they start
    one per event-loop iteration so that the jobs already running are not
    held back by the start-up of the others. A job that raises cancels the
    batch (the exception propagates in an ExceptionGroup); cancelling the
    caller cancels every job. Logs ``run_started`` (with ``log_fields``) and
    ``run_finished`` (``failed`` counts results for which the predicate holds).

    On asyncio the jobs' episodes (:func:`actors.run_episode` calls made in
    them) play their turns under the batch's turn gate: with instant policies
    a few episodes at a time take turns back to back instead of every episode
    in flight one turn each in turn, which keeps their data in the CPU's cache;
    an episode waiting for a slow reply holds nothing (see ``actors._gate``).

    ``gc_freeze`` (off by default: it changes interpreter-wide state, so a
    program that owns its process opts in, as the ``chaosops`` command does):
    while the batch runs, what survives the
    garbage collector is frozen out of its sight, so no collection walks every
    result and trace kept so far again (each walk stalls every job in flight),
    and young collections stay a few milliseconds long; it is unfrozen when the
    last batch of the process ends. The cost: cyclic garbage that was alive at
    a freeze is only collected after the batch; once a collection finds cyclic
    garbage, only long-lived survivors are frozen. See :func:`actors.gc_frozen`.
    """
    seq, cursor, started = start_batch(items, concurrency, log_fields)
    n = len(seq)
    results: list[R | None] = [None] * n
    finished: list[int] = []  # indices of the jobs that returned, for run_finished

    async def worker() -> None:
        for index in cursor:
            results[index] = await job(seq[index])
            finished.append(index)

    try:
        with gc_frozen(gc_freeze), _turn_gate():
            async with anyio.create_task_group() as tg:
                await _start_workers(min(concurrency, n), lambda: tg.start_soon(worker))
    finally:  # also when a job failed or the batch was cancelled: what did finish
        count = sum(1 for i in finished if failed(cast(R, results[i]))) if failed else 0
        log_finished(len(finished), count, started)
    return cast("list[R]", results)


class JobResults(Generic[R]):
    """What :func:`open_jobs` yields: ``(index, result)`` pairs as jobs finish,
    plus live counters for progress displays.

    ``total`` jobs in the batch, ``started`` so far, ``finished`` so far
    (including results not yet read), ``failed`` (finished results for which
    the ``failed`` predicate holds), and ``in_flight`` (started, not finished:
    the exact number of jobs running right now).
    """

    __slots__ = ("_receive", "_running", "failed", "finished", "started", "total")

    def __init__(self, receive: MemoryObjectReceiveStream[tuple[int, R]], total: int) -> None:
        self._receive = receive
        self.total = total
        self.started = 0
        self.finished = 0
        self.failed = 0
        self._running = 0

    @property
    def in_flight(self) -> int:
        """Jobs running right now (started, not finished, not cancelled)."""
        return self._running

    async def receive(self) -> tuple[int, R]:
        """The next ``(index, result)``; raises ``anyio.EndOfStream`` once all are read."""
        return await self._receive.receive()

    def __aiter__(self) -> JobResults[R]:
        return self

    async def __anext__(self) -> tuple[int, R]:
        try:
            return await self._receive.receive()
        except EndOfStream:
            raise StopAsyncIteration from None

    def __repr__(self) -> str:
        return (
            f"JobResults(total={self.total}, started={self.started}, "
            f"finished={self.finished}, in_flight={self.in_flight}, failed={self.failed})"
        )


class JobCounts:
    """The producer's side of a :class:`JobResults`: its counters, moved as
    jobs start, run, come back unrun and finish (by a batch's workers, or by
    a cluster's feed). ``failed`` judges a finished job's result."""

    __slots__ = ("failed", "results")

    def __init__(self, results: JobResults[Any], failed: Callable[[Any], bool] | None) -> None:
        self.results = results
        self.failed = failed

    def started(self, count: int = 1) -> None:
        self.results.started += count

    def unstarted(self, count: int) -> None:
        """Jobs handed back before they ran (their worker died)."""
        self.results.started -= count

    def running(self, count: int) -> None:
        """How many jobs run now."""
        self.results._running = count

    def finished(self, result: Any) -> None:
        self.results.finished += 1
        if self.failed is not None and self.failed(result):
            self.results.failed += 1


@asynccontextmanager
async def open_jobs(
    items: Iterable[T],
    job: Callable[[T], Awaitable[R]],
    *,
    concurrency: int,
    failed: Callable[[R], bool] | None = None,
    log_fields: Mapping[str, Any] | None = None,
    gc_freeze: bool = False,
) -> AsyncIterator[JobResults[R]]:
    """Like :func:`run_jobs`, streaming ``(index, result)`` as each job finishes.

    ::

        async with open_jobs(items, job, concurrency=8) as results:
            async for index, result in results:
                print(f"{results.finished}/{results.total}, {results.in_flight} running")

    The value is a :class:`JobResults`: an async iterator with live counters
    (``started``, ``finished``, ``in_flight``, ``failed``, ``total``). It ends
    when every job is done. Leaving the block early (break, error,
    cancellation) cancels the jobs still running; none outlives it.
    ``gc_freeze`` and the turn gate: as in :func:`run_jobs`.
    """
    seq, cursor, started = start_batch(items, concurrency, log_fields)
    n = len(seq)
    send, receive = anyio.create_memory_object_stream[tuple[int, R]](concurrency)
    results = JobResults(receive, n)

    counts = JobCounts(results, failed)

    async def worker(out: MemoryObjectSendStream[tuple[int, R]]) -> None:
        async with out:
            for index in cursor:
                counts.started()
                counts.running(results.in_flight + 1)
                try:
                    result = await job(seq[index])
                finally:  # returned, raised or cancelled: no longer running
                    counts.running(results.in_flight - 1)
                counts.finished(result)
                await out.send((index, result))

    async def start_workers(spawn: Callable[[MemoryObjectSendStream[Any]], object]) -> None:
        async with send:  # the stream ends once this and every worker's clone are closed
            await _start_workers(min(concurrency, n), lambda: spawn(send.clone()))

    clones: list[MemoryObjectSendStream[Any]] = []
    raised: Exception | None = None
    try:
        with gc_frozen(gc_freeze), _turn_gate():
            async with anyio.create_task_group() as tg:

                def spawn(out: MemoryObjectSendStream[Any]) -> None:
                    clones.append(out)
                    tg.start_soon(worker, out)

                tg.start_soon(start_workers, spawn)
                async with receive:
                    try:
                        yield results
                    except Exception as exc:
                        # The consumer's own error: raised as itself once the
                        # jobs are stopped, not inside the task group's
                        # ExceptionGroup.
                        raised = exc
                tg.cancel_scope.cancel()  # the consumer left early: stop what is left
    finally:
        # A worker cancelled before its first step never ran its ``async with
        # out``: close every clone (closing is idempotent), and ``send`` in case
        # the workers' starter never ran.
        for out in clones:
            out.close()
        send.close()
        log_finished(results.finished, results.failed, started)
    if raised is not None:
        raise raised
