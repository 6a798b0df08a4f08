"""The driver's side of a Ray batch (actors.driver.Feed), without Ray: what
it does when a worker dies and another is started in its place."""

from __future__ import annotations

from collections import deque
from typing import Any

import anyio
import pytest

from actors import JobResults
from actors import _cluster_driver as driver
from actors._batch import JobCounts


class Pool:
    """A pool whose replacement worker comes up after ``up_s`` seconds (never: None)."""

    def __init__(self, up_s: float | None) -> None:
        self.up_s = up_s
        self.cancelled = False

    async def replace(self) -> int | None:
        try:
            if self.up_s is None:
                await anyio.sleep_forever()
            await anyio.sleep(self.up_s)
        except BaseException:
            self.cancelled = True
            raise
        return 7


def feed(pool: Pool, work: driver.Work) -> driver.Feed:
    send, receive = anyio.create_memory_object_stream[tuple[int, Any]](float("inf"))
    send.close()  # these feeds hand nothing on: what they do with workers is tested
    receive.close()
    counts = JobCounts(JobResults(receive, 0), failed=None)
    return driver.Feed(pool, [], work, counts=counts, send=send, backlog=0)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_a_replacement_is_not_waited_for_once_every_job_is_back() -> None:
    pool, work = Pool(up_s=None), driver.Work(deque(), remaining=2)
    got: list[int | None] = []

    async def lose_a_worker() -> None:
        got.append(await feed(pool, work)._replacement())

    async with anyio.create_task_group() as tg:
        tg.start_soon(lose_a_worker)
        await anyio.wait_all_tasks_blocked()
        work.came_back(1)
        await anyio.wait_all_tasks_blocked()
        assert got == []  # a job still to come back: the replacement is awaited
        work.came_back(1)
    assert got == [None] and pool.cancelled


@pytest.mark.asyncio
async def test_a_replacement_that_comes_up_takes_the_dead_worker_s_place() -> None:
    pool, work = Pool(up_s=0.0), driver.Work(deque([3, 4]), remaining=2)
    assert await feed(pool, work)._replacement() == 7
    assert not pool.cancelled and work.remaining == 2


@pytest.mark.asyncio
async def test_every_job_already_back_gives_up_the_replacement_at_once() -> None:
    pool, work = Pool(up_s=None), driver.Work(deque(), remaining=0)
    with anyio.fail_after(5):  # generous: it returns without waiting at all
        assert await feed(pool, work)._replacement() is None
    assert pool.cancelled
