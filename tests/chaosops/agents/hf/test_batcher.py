"""The batcher gathers concurrent callers into one call, hands each its own
answer or the batch's error, and drops a caller that stopped waiting."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from chaosops.agents.hf.batcher import Batcher


@pytest.mark.asyncio
async def test_concurrent_callers_share_batches_and_get_their_own_answers() -> None:
    batcher = Batcher(lambda items: [i * 10 for i in items], max_batch=8, wait_s=0.05)
    answers: dict[int, int] = {}

    async def ask(i: int) -> None:
        answers[i] = await batcher.submit(i)

    async with anyio.create_task_group() as tg:
        for i in range(16):
            tg.start_soon(ask, i)
    batcher.close()
    assert answers == {i: i * 10 for i in range(16)}
    assert sum(size * n for size, n in batcher.sizes.items()) == 16
    assert max(batcher.sizes) == 8  # 16 callers within the wait: two full batches


@pytest.mark.asyncio
async def test_the_batchs_error_reaches_each_caller() -> None:
    def fail(items: list[int]) -> list[int]:
        raise MemoryError("out of memory")

    batcher = Batcher(fail, max_batch=4, wait_s=0.01)
    errors: list[BaseException] = []

    async def ask(i: int) -> None:
        try:
            await batcher.submit(i)
        except MemoryError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        for i in range(3):
            tg.start_soon(ask, i)
    batcher.close()
    assert len(errors) == 3


@pytest.mark.asyncio
async def test_a_caller_that_gave_up_is_left_out_of_the_next_batch() -> None:
    release = threading.Event()
    seen: list[list[str]] = []

    def run(items: list[str]) -> list[str]:
        seen.append(list(items))
        release.wait(5)
        return items

    batcher = Batcher(run, max_batch=4, wait_s=0.0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(batcher.submit, "first")  # holds the thread until released
        await anyio.sleep(0.05)
        with anyio.move_on_after(0.05):
            await batcher.submit("late")  # waits behind the first batch, then gives up
        tg.start_soon(batcher.submit, "next")
        await anyio.sleep(0.05)
        release.set()
    batcher.close()
    assert seen == [["first"], ["next"]]


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        Batcher(list, max_batch=0, wait_s=0.0)


@pytest.mark.asyncio
async def test_the_event_loop_is_free_while_a_batch_runs() -> None:
    batcher = Batcher(lambda items: (time.sleep(0.3), items)[1], max_batch=1, wait_s=0.0)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(tick)
        assert await batcher.submit("x") == "x"
        tg.cancel_scope.cancel()
    batcher.close()
    assert ticks >= 10  # the loop kept running while the thread generated
