"""A Ray worker's own loop (actors.worker_side.JobWorker), driven here without Ray:
the actor class is a plain class whose calls run its event loop."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

import anyio
import pytest

import actors as actors_pkg
from actors import _cluster_driver as driver
from actors import _cluster_worker as worker_side
from actors._batch import JobCounts


class Job:
    """A worker's job: each item is (seconds to sleep, value or exception to
    raise); it counts how many run at once and how many were cancelled."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.closed = False
        self.cancelled = 0

    async def __call__(self, item: tuple[float, Any]) -> Any:
        seconds, value = item
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await anyio.sleep(seconds)
        except BaseException:
            self.cancelled += 1
            raise
        finally:
            self.running -= 1
        if isinstance(value, Exception):
            raise value
        return value * 2

    async def aclose(self) -> None:
        self.closed = True


def worker(job: Job, slots: int) -> Any:
    return worker_side.JobWorker(0, lambda: job, {}, slots)


def drain(w: Any, jobs: list[tuple[int, Any]], held: set[int]) -> dict[int, Any]:
    """Call ``w`` as the driver does until every job given is back."""
    got: dict[int, Any] = {}
    while jobs or held:
        played, _ = w.run(jobs)
        jobs = []
        for index, result in played:
            assert index not in got, "a result returned twice"
            got[index] = result
            held.discard(index)
    return got


def test_jobs_left_running_by_one_call_come_back_in_a_later_one() -> None:
    job = Job()
    w = worker(job, slots=2)
    jobs = [(0, (0.0, 1)), (1, (0.3, 2)), (2, (0.3, 3))]
    first, _ = w.run(jobs)
    assert [index for index, _ in first] == [0]  # returned without waiting for the slow ones
    assert drain(w, [], {1, 2}) == {1: 4, 2: 6}
    w.close()


def test_a_worker_runs_its_slots_at_once_and_holds_the_rest() -> None:
    job = Job()
    w = worker(job, slots=3)
    got = drain(w, [(i, (0.01, i)) for i in range(20)], set(range(20)))
    assert got == {i: 2 * i for i in range(20)}
    assert job.peak == 3
    w.close()


def test_a_call_returns_at_once_when_nothing_is_left_and_soon_after_a_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a 1 s wait for more results, 10 s at most a call: "at once" and "waited"
    # are then apart by far more than a loaded machine's scheduling noise
    monkeypatch.setattr(worker_side, "RETURN_S", 1.0)
    monkeypatch.setattr(worker_side, "CALL_MAX_S", 10.0)
    job = Job()
    w = worker(job, slots=4)
    started = time.monotonic()
    played, _ = w.run([(0, (0.0, 1))])
    assert played == [(0, 2)] and time.monotonic() - started < worker_side.RETURN_S / 2
    started = time.monotonic()
    played, _ = w.run([(1, (0.0, 1)), (2, (30.0, 1))])
    took = time.monotonic() - started
    assert played == [(1, 2)]
    # it waited about RETURN_S for more to finish, not for the slow job (which stays running)
    assert worker_side.RETURN_S / 2 <= took < worker_side.CALL_MAX_S
    w.close()
    assert job.cancelled == 1 and job.closed


def test_a_job_that_raises_fails_the_call() -> None:
    w = worker(Job(), slots=2)
    with pytest.raises(ValueError, match="broken"):
        drain(w, [(0, (0.0, ValueError("broken")))], {0})
    w.close()


class FakeActor:
    """A worker as the driver sees it: ``run.remote(jobs)`` an awaitable, one
    call at a time (as Ray runs a plain actor's calls), in a thread of its own."""

    def __init__(self, job: Job, slots: int) -> None:
        self.worker = worker_side.JobWorker(0, lambda: job, {}, slots)
        self.lock = threading.Lock()
        self.run = self  # actor.run.remote(jobs)

    def remote(self, jobs: list[tuple[int, Any]]) -> Any:
        def call() -> Any:
            with self.lock:
                return self.worker.run(jobs)

        return anyio.to_thread.run_sync(call)


@pytest.mark.asyncio
async def test_a_backed_up_driver_gives_no_new_jobs_but_lets_the_running_ones_finish() -> None:
    job = Job()
    actors = [FakeActor(job, slots=4), FakeActor(job, slots=4)]
    pool = driver.Pool(spawn=lambda number: None, slots=4)
    for actor in actors:
        pool.add(actor)
    items = [(0.2, i) for i in range(60)]
    send, receive = anyio.create_memory_object_stream[tuple[int, Any]](float("inf"))
    results = actors_pkg.JobResults(receive, len(items))
    work = driver.Work(deque(range(len(items))), len(items))
    counts = JobCounts(results, failed=None)
    feed = driver.Feed(pool, items, work, counts=counts, send=send, backlog=0)
    got: dict[int, Any] = {}
    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(feed.all)
        async with receive:
            async for index, result in results:
                assert index not in got
                got[index] = result
                if len(got) == 1:  # a reader that falls behind: the results pile up
                    await anyio.sleep(1.0)
                    # the jobs given went on and came back; no new ones were handed out
                    assert results.started == results.finished < len(items)
                    assert [len(held) for held in pool.held] == [0, 0]
    assert got == {i: 2 * i for i in range(60)}
    assert job.peak <= 8
    assert time.monotonic() - started < 10
    for actor in actors:
        await anyio.to_thread.run_sync(actor.worker.close)
