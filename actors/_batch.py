"""Bounded-concurrency batches of jobs (typically episodes)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from time import perf_counter
from typing import Any, TypeVar, cast

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from . import _logging

T = TypeVar("T")
R = TypeVar("R")


def _check(concurrency: int) -> None:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an integer >= 1, got {concurrency!r}")


def _log_start(n: int, concurrency: int, log_fields: Mapping[str, Any] | None) -> float:
    if _logging.log_enabled(_logging.INFO):
        _logging.STATE.logger.info(
            "run_started", episodes=n, concurrency=concurrency, **(log_fields or {})
        )
    return perf_counter()


def _log_finish(n: int, failed: int, started: float) -> None:
    if _logging.log_enabled(_logging.INFO):
        _logging.STATE.logger.info(
            "run_finished", episodes=n, failed=failed, wall_s=round(perf_counter() - started, 6)
        )


async def run_jobs(
    items: Iterable[T],
    job: Callable[[T], Awaitable[R]],
    *,
    concurrency: int,
    failed: Callable[[R], bool] | None = None,
    log_fields: Mapping[str, Any] | None = None,
) -> list[R]:
    """Run ``job(item)`` for every item, at most ``concurrency`` at a time.

    Results come in the order of ``items``. ``min(concurrency, len(items))``
    worker tasks pull the next index from a shared cursor, so memory does not
    grow with the number of items beyond the results themselves. A job that
    raises cancels the batch (the exception propagates in an ExceptionGroup);
    cancelling the caller cancels every job. Logs ``run_started`` (with
    ``log_fields``) and ``run_finished`` (``failed`` counts results for which
    the predicate holds).
    """
    _check(concurrency)
    seq: Sequence[T] = items if isinstance(items, Sequence) else list(items)
    n = len(seq)
    results: list[R | None] = [None] * n
    cursor = iter(range(n))  # shared: each index is taken by exactly one worker
    started = _log_start(n, concurrency, log_fields)

    async def worker() -> None:
        for index in cursor:
            results[index] = await job(seq[index])

    async with anyio.create_task_group() as tg:
        for _ in range(min(concurrency, n)):
            tg.start_soon(worker)
    done = cast("list[R]", results)
    _log_finish(n, sum(map(failed, done)) if failed else 0, started)
    return done


@asynccontextmanager
async def open_jobs(
    items: Iterable[T],
    job: Callable[[T], Awaitable[R]],
    *,
    concurrency: int,
    failed: Callable[[R], bool] | None = None,
    log_fields: Mapping[str, Any] | None = None,
) -> AsyncIterator[MemoryObjectReceiveStream[tuple[int, R]]]:
    """Like :func:`run_jobs`, streaming ``(index, result)`` as each job finishes.

    ::

        async with open_jobs(items, job, concurrency=8) as results:
            async for index, result in results:
                ...

    The stream ends when every job is done. Leaving the block early (break,
    error, cancellation) cancels the jobs still running; none outlives it.
    """
    _check(concurrency)
    seq: Sequence[T] = items if isinstance(items, Sequence) else list(items)
    n = len(seq)
    cursor = iter(range(n))
    count = {"done": 0, "failed": 0}
    started = _log_start(n, concurrency, log_fields)
    send, receive = anyio.create_memory_object_stream[tuple[int, R]](concurrency)

    async def worker(out: MemoryObjectSendStream[tuple[int, R]]) -> None:
        async with out:
            for index in cursor:
                result = await job(seq[index])
                count["done"] += 1
                if failed is not None and failed(result):
                    count["failed"] += 1
                await out.send((index, result))

    try:
        async with anyio.create_task_group() as tg:
            async with send:
                for _ in range(min(concurrency, n)):
                    tg.start_soon(worker, send.clone())
            async with receive:
                yield receive
            tg.cancel_scope.cancel()  # the consumer left early: stop what is left
    finally:
        _log_finish(count["done"], count["failed"], started)
