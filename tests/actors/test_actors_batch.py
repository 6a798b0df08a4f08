"""Batches: order, bounded concurrency, streaming, cancellation leaves nothing behind."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from actors_toy import ToyEnv, act, captured_events, instant_policies, run_kwargs

from actors import EpisodeTrace, open_jobs, run_episode, run_jobs
from actors._gc import _INTERPRETER_FROZEN, BATCH_GEN0_THRESHOLD, EAGER_GEN0_THRESHOLD, gc_eager


def _unfrozen() -> bool:
    """Nothing frozen beyond what the interpreter starts with (3.12 freezes a few tuples)."""
    return gc.get_freeze_count() <= _INTERPRETER_FROZEN


def _other_tasks(baseline: set[asyncio.Task[Any]]) -> set[asyncio.Task[Any]]:
    """Tasks alive now that were not alive at ``baseline`` (the test runner's)."""
    return asyncio.all_tasks() - baseline - {asyncio.current_task()}  # type: ignore[operator]


@pytest.mark.asyncio
async def test_results_in_input_order_with_bounded_concurrency() -> None:
    in_flight = peak = 0

    async def job(n: int) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await anyio.sleep(0.001 * (n % 3))
        in_flight -= 1
        return n * n

    assert await run_jobs(range(50), job, concurrency=8) == [n * n for n in range(50)]
    assert peak == 8
    assert await run_jobs([], job, concurrency=8) == []


@pytest.mark.asyncio
async def test_invalid_concurrency() -> None:
    async def job(n: int) -> int:
        return n

    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="concurrency"):
            await run_jobs([1], job, concurrency=bad)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_streaming_yields_every_result_as_it_finishes() -> None:
    """Job n finishes only once job n + 1 has been read: the results come in
    the order the jobs finish (4 first), not the order of the items."""
    read = [anyio.Event() for _ in range(6)]
    read[5].set()

    async def job(n: int) -> int:
        await read[n + 1].wait()
        return n

    got = []
    async with open_jobs(range(5), job, concurrency=5) as results:
        async for index, result in results:
            got.append((index, result))
            read[index].set()
    assert got == [(n, n) for n in reversed(range(5))]


@pytest.mark.asyncio
async def test_leaving_the_stream_early_cancels_the_rest() -> None:
    started: list[int] = []
    baseline = asyncio.all_tasks()

    async def job(n: int) -> int:
        started.append(n)
        if n:
            await anyio.sleep_forever()
        return n

    with anyio.fail_after(5):
        async with open_jobs(range(20), job, concurrency=4) as results:
            async for index, _ in results:
                assert index == 0
                break
    assert len(started) <= 5
    assert not _other_tasks(baseline)


@pytest.mark.asyncio
async def test_failing_environment_in_a_batch() -> None:
    envs = [ToyEnv(steps=8), ToyEnv(steps=8, fail_step=3), ToyEnv(fail_reset=True), ToyEnv()]

    async def job(env: ToyEnv) -> EpisodeTrace:
        return await run_episode(env, policies=instant_policies(), **run_kwargs())

    with captured_events() as events:
        traces = await run_jobs(
            envs, job, concurrency=2, failed=lambda t: t.status == "failed",
            log_fields={"turn_timeout": None},
        )  # fmt: skip
    assert [t.status for t in traces] == ["ok", "failed", "failed", "ok"]
    assert [len(t.turns) for t in traces] == [8, 3, 0, 8]
    assert events[0]["event"] == "run_started" and events[0]["episodes"] == 4
    assert events[0]["concurrency"] == 2 and events[0]["turn_timeout"] is None
    assert events[-1]["event"] == "run_finished" and events[-1]["failed"] == 2
    finished = [e for e in events if e["event"] == "episode_finished"]
    assert sorted(e["status"] for e in finished) == ["failed", "failed", "ok", "ok"]


@pytest.mark.asyncio
async def test_cancelling_a_batch_leaves_no_task_behind() -> None:
    import time

    from actors import in_thread

    async def hung(obs: Any, role: str) -> Any:
        await anyio.sleep_forever()

    def blocking(obs: Any, role: str) -> Any:
        time.sleep(0.05)
        return act(role)

    baseline = asyncio.all_tasks()
    policies: dict[str, Any] = instant_policies()
    policies["b"] = hung
    policies["a"] = in_thread(blocking)

    async def job(n: int) -> EpisodeTrace:
        return await run_episode(ToyEnv(steps=40), policies=policies, **run_kwargs())

    with anyio.move_on_after(0.2) as scope:
        await run_jobs(range(100), job, concurrency=32)
    assert scope.cancelled_caught
    assert not _other_tasks(baseline)

    with anyio.move_on_after(0.2) as scope:
        async with open_jobs(range(100), job, concurrency=32) as results:
            async for _ in results:
                pass
    assert scope.cancelled_caught
    assert not _other_tasks(baseline)


@pytest.mark.asyncio
async def test_batch_equals_sequential_for_a_deterministic_policy() -> None:
    import random

    def factory(seed: int) -> dict[str, Any]:
        rng = random.Random(seed)
        return {r: (lambda obs, role: act(role, rng.randint(0, 9))) for r in "abcd"}

    async def job(seed: int) -> list[Any]:
        env = ToyEnv(steps=12)
        await run_episode(env, policies=factory(seed), **run_kwargs())
        return env.applied

    sequential = [await job(seed) for seed in range(40)]
    assert await run_jobs(range(40), job, concurrency=16) == sequential


@pytest.mark.asyncio
async def test_stream_counts_jobs_started_finished_and_in_flight() -> None:
    gates = [anyio.Event() for _ in range(6)]
    three_running = anyio.Event()
    calls = 0

    async def job(n: int) -> int:
        nonlocal calls
        calls += 1
        if calls == 3:
            three_running.set()
        await gates[n].wait()
        return n

    with anyio.fail_after(5):
        async with open_jobs(range(6), job, concurrency=3, failed=lambda r: r == 0) as results:
            await three_running.wait()
            assert (results.total, results.started, results.finished) == (6, 3, 0)
            assert results.in_flight == 3
            gates[0].set()
            assert await results.receive() == (0, 0)
            assert (results.finished, results.failed) == (1, 1)
            assert results.started == 4 and results.in_flight == 3  # the worker took the next
            for gate in gates[1:]:
                gate.set()
            rest = [item async for item in results]
    assert sorted(rest) == [(n, n) for n in range(1, 6)]
    assert (results.started, results.finished, results.in_flight) == (6, 6, 0)
    assert "in_flight=0" in repr(results)


@pytest.mark.asyncio
async def test_batches_freeze_gc_survivors_and_unfreeze_when_the_last_one_ends() -> None:
    assert _unfrozen()
    threshold = gc.get_threshold()
    seen: list[int] = []
    thresholds: list[int] = []

    async def job(n: int) -> int:
        gc.collect(1)  # survivors of an older-generation collection are frozen
        seen.append(gc.get_freeze_count())
        thresholds.append(gc.get_threshold()[0])
        await anyio.lowlevel.checkpoint()
        return n

    await run_jobs(range(4), job, concurrency=2, gc_freeze=True)
    assert len(seen) == 4 and all(count > _INTERPRETER_FROZEN for count in seen)
    assert _unfrozen()
    # The eager mode's young threshold while the batch runs; the process's setting comes back.
    assert thresholds == [max(threshold[0], EAGER_GEN0_THRESHOLD)] * 4
    assert gc.get_threshold() == threshold

    seen.clear()
    async with open_jobs(range(3), job, concurrency=3) as results:  # off by default
        assert sorted([index async for index, _ in results]) == [0, 1, 2]
    assert len(seen) == 3 and all(count <= _INTERPRETER_FROZEN for count in seen)

    async def outer(n: int) -> int:
        await run_jobs(range(2), job, concurrency=1, gc_freeze=True)  # nested: ends first
        gc.collect(1)
        seen.append(gc.get_freeze_count())
        return n

    seen.clear()
    await run_jobs(range(2), outer, concurrency=2, gc_freeze=True)
    # still frozen after the inner batches ended
    assert all(count > _INTERPRETER_FROZEN for count in seen)
    assert _unfrozen()


class _Cycle:
    """An object that refers to itself: only the collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.mark.asyncio
async def test_eager_mode_freezes_young_survivors_and_ignores_the_garbage_held_before() -> None:
    _Cycle()  # cyclic garbage the process held before the batch: frozen, not judged
    snapshots: list[tuple[bool, int]] = []

    async def job(n: int) -> int:
        kept = [[] for _ in range(10)]  # young and alive
        before = gc.get_freeze_count()
        gc.collect(0)
        snapshots.append((gc_eager(), gc.get_freeze_count() - before))
        del kept
        await anyio.lowlevel.checkpoint()
        return n

    assert await run_jobs(range(3), job, concurrency=3, gc_freeze=True) == [0, 1, 2]
    assert [eager for eager, _ in snapshots] == [True] * 3
    assert all(grew >= 10 for _, grew in snapshots)  # a young collection's survivors, frozen
    assert not gc_eager() and _unfrozen()


@pytest.mark.asyncio
async def test_cyclic_garbage_switches_the_batch_to_freezing_only_old_survivors() -> None:
    threshold = gc.get_threshold()
    seen: list[tuple[bool, int, int, int]] = []

    async def job(n: int) -> int:
        if n == 0:
            _Cycle()  # the workload makes cyclic garbage (a cancelled HTTP request does)
            gc.collect(0)  # found: from now on the survivors mode
        await anyio.lowlevel.checkpoint()
        kept = [[] for _ in range(10)]  # young and alive
        before = gc.get_freeze_count()
        gc.collect(0)
        young = gc.get_freeze_count() - before
        gc.collect(1)
        old = gc.get_freeze_count() - before
        seen.append((gc_eager(), gc.get_threshold()[0], young, old))
        del kept
        return n

    assert await run_jobs(range(3), job, concurrency=1, gc_freeze=True) == [0, 1, 2]
    assert [(eager, t0, young) for eager, t0, young, _ in seen] == [
        (False, max(threshold[0], BATCH_GEN0_THRESHOLD), 0)
    ] * 3
    assert all(old > 0 for *_, old in seen)  # an older generation's survivors are still frozen
    assert gc.get_threshold() == threshold and _unfrozen()

    # The next batch starts eager again.
    modes: list[bool] = []

    async def probe(n: int) -> int:
        modes.append(gc_eager())
        return n

    await run_jobs(range(2), probe, concurrency=2, gc_freeze=True)
    assert modes == [True, True]


@pytest.mark.asyncio
async def test_gc_is_unfrozen_after_a_failed_or_cancelled_batch() -> None:
    async def boom(n: int) -> int:
        gc.collect(1)
        raise ValueError(n)

    threshold = gc.get_threshold()
    with pytest.raises(ExceptionGroup):
        await run_jobs(range(3), boom, concurrency=3, gc_freeze=True)
    assert _unfrozen()
    assert gc.get_threshold() == threshold

    async def hung(n: int) -> int:
        gc.collect(1)
        await anyio.sleep_forever()
        return n

    with anyio.move_on_after(0.05):
        async with open_jobs(range(3), hung, concurrency=3, gc_freeze=True) as results:
            async for _ in results:
                pass
    assert _unfrozen()


@pytest.mark.asyncio
async def test_an_application_that_froze_objects_itself_is_left_alone() -> None:
    gc.freeze()
    try:
        grew: list[bool] = []

        async def job(n: int) -> int:
            before = gc.get_freeze_count()
            gc.collect(1)
            grew.append(gc.get_freeze_count() > before)
            return n

        assert await run_jobs(range(3), job, concurrency=3, gc_freeze=True) == [0, 1, 2]
        assert grew == [False, False, False]
        assert gc.get_freeze_count() > 0  # not unfrozen either
    finally:
        gc.unfreeze()


@pytest.mark.asyncio
async def test_a_cancelled_run_jobs_still_logs_run_finished() -> None:
    async def job(i: int) -> int:
        if i == 6:  # its worker was free: jobs 0, 1 and 2 are done (3 to 5 hang)
            scope.cancel()
        if i >= 3:
            await anyio.sleep_forever()
        return i

    with captured_events() as events:
        with anyio.CancelScope() as scope:
            await run_jobs(range(10), job, concurrency=4, failed=lambda r: r == 0)
    (finished,) = [e for e in events if e["event"] == "run_finished"]
    assert finished["episodes"] == 3 and finished["failed"] == 1  # what did finish


@pytest.mark.asyncio
async def test_leaving_open_jobs_early_leaves_nothing_in_flight() -> None:
    never = anyio.Event()

    async def job(i: int) -> int:
        if i:  # only the first finishes: the others are in flight when the consumer leaves
            await never.wait()
        return i

    async with open_jobs(range(10), job, concurrency=3) as results:
        async for _ in results:
            assert results.in_flight >= 2  # jobs 1 and 2 (the first's worker may take job 3)
            break
    # the others were cancelled
    assert (results.finished, results.in_flight) == (1, 0) and results.started >= 3


@pytest.mark.asyncio
async def test_the_consumers_own_error_comes_out_as_itself() -> None:
    async def job(i: int) -> int:
        return i

    with pytest.raises(LookupError, match="consumer broke"):
        async with open_jobs(range(5), job, concurrency=2) as results:
            async for _ in results:
                raise LookupError("consumer broke")
