"""The batch's turn gate: instant episodes play back to back a few at a time,
an episode back from a wait is served first, and nobody waits on a holder."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from actors_toy import ROLES, ToyEnv, act, instant_policies, run_kwargs

from actors import EpisodeTrace, open_jobs, run_episode, run_jobs
from actors._gate import CURRENT_GATE, HOT_EPISODES, TurnGate


def _most_open(calls: list[int]) -> int:
    """The most episodes at once between their first and their last policy call."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, episode in enumerate(calls):
        first.setdefault(episode, i)
        last[episode] = i
    return max(sum(1 for e in first if first[e] <= i <= last[e]) for i in range(len(calls)))


def _recording(episode: int, calls: list[int]) -> dict[str, Any]:
    def policy(obs: Any, role: str) -> Any:
        calls.append(episode)
        return act(role)

    return dict.fromkeys(ROLES, policy)


@pytest.mark.asyncio
async def test_instant_episodes_play_back_to_back_a_few_at_a_time() -> None:
    calls: list[int] = []

    async def job(n: int) -> EpisodeTrace:
        return await run_episode(ToyEnv(steps=24), policies=_recording(n, calls), **run_kwargs())

    traces = await run_jobs(range(32), job, concurrency=32)
    assert all(len(t.turns) == 24 for t in traces)
    assert len(calls) == 32 * 24
    # Every episode in flight at once (32), but their turns interleave a few at a time.
    assert _most_open(calls) <= HOT_EPISODES

    calls.clear()
    async with open_jobs(range(32), job, concurrency=32) as results:
        assert len([r async for r in results]) == 32
    assert _most_open(calls) <= HOT_EPISODES


@pytest.mark.asyncio
async def test_outside_a_batch_episodes_interleave_every_turn() -> None:
    # No batch, no gate: concurrent episodes take turns round-robin, as before.
    calls: list[int] = []
    async with anyio.create_task_group() as tg:
        for n in range(8):
            tg.start_soon(
                lambda n=n: run_episode(
                    ToyEnv(steps=8), policies=_recording(n, calls), **run_kwargs()
                )
            )
    assert _most_open(calls) == 8


@pytest.mark.asyncio
async def test_an_episode_back_from_a_wait_is_served_within_a_slice() -> None:
    # One episode's role "a" waits 5 ms for each reply, its other roles are
    # instant; the other episodes are instant and long enough to hold every
    # permit for a second or more. After each slow reply the episode's next
    # (instant) turn needs a permit again: it must get one within a few
    # slices, not once an instant episode ends. Measured in turns the instant
    # episodes played meanwhile (a count, whatever the machine's load), against
    # their length: a few slices are a few hundred turns, an episode 6,000.
    played = [0]  # turns of the instant episodes so far
    slow_replied: list[int] = []
    next_asked: list[int] = []

    async def slow(obs: Any, role: str) -> Any:
        await anyio.sleep(0.005)
        slow_replied.append(played[0])
        return act(role)

    def instant_after(obs: Any, role: str) -> Any:
        if role == "b":
            next_asked.append(played[0])
        return act(role)

    def counted(role: str) -> Any:
        def policy(obs: Any, role: str) -> Any:
            played[0] += 1
            return act(role)

        return policy

    async def job(n: int) -> EpisodeTrace:
        if n == 0:
            policies: dict[str, Any] = dict.fromkeys(ROLES, instant_after)
            policies["a"] = slow
            return await run_episode(ToyEnv(steps=16), policies=policies, **run_kwargs())
        env = ToyEnv(steps=6000)
        instant = {role: counted(role) for role in ROLES}
        return await run_episode(env, policies=instant, **run_kwargs(max_turns=6000))

    traces = await run_jobs(range(HOT_EPISODES + 4), job, concurrency=HOT_EPISODES + 4)
    assert all(t.status == "ok" for t in traces)
    assert len(slow_replied) == len(next_asked) == 4
    gaps = [asked - replied for replied, asked in zip(slow_replied, next_asked, strict=True)]
    assert max(gaps) < 600, gaps  # a tenth of an instant episode


@pytest.mark.asyncio
async def test_turns_of_slow_policies_take_no_permit(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each actor's first turn is taken for instant (a permit, one pass of the
    # loop); once its reply showed it slow, its turns are played without a
    # permit, so that a batch of slow policies never waits in line for one.
    from structlog.contextvars import get_contextvars

    taken: list[str] = []
    acquire = TurnGate.acquire

    async def counted(self: TurnGate, returning: bool = False) -> None:
        taken.append(get_contextvars().get("episode_id", "?"))
        await acquire(self, returning)

    monkeypatch.setattr(TurnGate, "acquire", counted)

    async def slow(obs: Any, role: str) -> Any:
        await anyio.sleep(0.002)
        return act(role)

    instant = instant_policies()

    async def job(n: int) -> EpisodeTrace:
        policies = dict.fromkeys(ROLES, slow) if n % 2 else instant
        return await run_episode(
            ToyEnv(steps=16), policies=policies, episode_id=f"e{n}", **run_kwargs()
        )

    traces = await run_jobs(range(8), job, concurrency=8)
    assert all(len(t.turns) == 16 for t in traces)
    for n in range(1, 8, 2):  # one permit for each role's first turn, none after
        assert taken.count(f"e{n}") == len(ROLES), (n, taken)
    for n in range(0, 8, 2):  # instant: one for the episode (again after a slice)
        assert taken.count(f"e{n}") >= 1, (n, taken)


@pytest.mark.asyncio
async def test_holders_never_wait_on_each_other() -> None:
    # Every episode's first turn waits until all of them have asked: with the
    # permits held through the wait, the episodes past the first few could
    # never ask, and this would hang.
    n = 4 * HOT_EPISODES
    asked = 0
    everyone = anyio.Event()

    async def barrier(obs: Any, role: str) -> Any:
        nonlocal asked
        if obs.step == 0:
            asked += 1
            if asked == n:
                everyone.set()
            await everyone.wait()
        return act(role)

    async def job(i: int) -> EpisodeTrace:
        return await run_episode(
            ToyEnv(steps=8), policies=dict.fromkeys(ROLES, barrier), **run_kwargs()
        )

    with anyio.fail_after(10):
        traces = await run_jobs(range(n), job, concurrency=n)
    assert all(len(t.turns) == 8 for t in traces)


@pytest.mark.asyncio
async def test_a_batch_inside_a_policy_of_a_batch() -> None:
    async def inner(obs: Any, role: str) -> Any:
        traces = await run_jobs(
            range(6),
            lambda i: run_episode(
                ToyEnv(steps=4),
                policies=instant_policies(),
                **run_kwargs(),
            ),
            concurrency=6,
        )
        return act(role, sum(len(t.turns) for t in traces))

    async def job(i: int) -> list[Any]:
        env = ToyEnv(steps=4)
        await run_episode(env, policies=dict.fromkeys(ROLES, inner), **run_kwargs())
        return env.applied

    with anyio.fail_after(10):
        applied = await run_jobs(range(8), job, concurrency=8)
    assert applied == [[("24", r) for r in ROLES]] * 8


@pytest.mark.asyncio
async def test_cancelling_episodes_in_line_for_a_permit_leaves_nothing_behind() -> None:
    # Long episodes, half of them with a slow role: some hold permits, some
    # wait in either line, some give theirs away at the end of a slice, when
    # the batch is cancelled. No task is left, and every permit is back.
    baseline = asyncio.all_tasks()
    gates: set[TurnGate] = set()

    def instant(obs: Any, role: str) -> Any:
        gate = CURRENT_GATE.get()
        assert gate is not None
        gates.add(gate)
        return act(role)

    async def slow(obs: Any, role: str) -> Any:
        await anyio.sleep(0.003)
        return act(role)

    async def job(n: int) -> EpisodeTrace:
        policies = dict.fromkeys(ROLES, instant)
        if n % 2:
            policies["a"] = slow
        return await run_episode(
            ToyEnv(steps=100_000), policies=policies, **run_kwargs(max_turns=100_000)
        )

    for delay in (0.05, 0.1, 0.2):
        with anyio.move_on_after(delay) as scope:
            await run_jobs(range(32), job, concurrency=32)
        assert scope.cancelled_caught
        assert not asyncio.all_tasks() - baseline - {asyncio.current_task()}
    assert len(gates) == 3  # one per batch
    for gate in gates:
        assert gate.free == HOT_EPISODES
        assert not gate.returning


@pytest.mark.asyncio
async def test_the_gate_serves_returning_episodes_first_and_loses_no_permit() -> None:
    gate = TurnGate(1)
    order: list[str] = []

    async def take(name: str, returning: bool) -> None:
        await gate.acquire(returning=returning)
        order.append(name)

    await gate.acquire()  # held here
    assert gate.free == 0
    async with anyio.create_task_group() as tg:
        tg.start_soon(take, "new", False)
        await anyio.lowlevel.checkpoint()
        tg.start_soon(take, "back", True)
        await anyio.lowlevel.checkpoint()
        assert gate.returning
        gate.release()  # to "back", first, though it came after "new"
        await anyio.sleep(0.01)
        assert order == ["back"]
        gate.release()  # "back" is done with it: to "new"
    assert order == ["back", "new"]
    gate.release()
    assert gate.free == 1

    # A waiter cancelled once the permit was handed to it passes the permit on.
    await gate.acquire()
    got: list[str] = []

    async def wait_for(name: str) -> None:
        await gate.acquire()
        got.append(name)

    loop = asyncio.get_running_loop()
    first = loop.create_task(wait_for("first"))
    second = loop.create_task(wait_for("second"))
    await anyio.lowlevel.checkpoint()
    gate.release()  # handed to "first" ...
    first.cancel()  # ... which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await first
    await second
    assert got == ["second"]
    gate.release()
    assert gate.free == 1

    # A waiter cancelled while in line leaves the line.
    await gate.acquire()
    third = loop.create_task(wait_for("third"))
    await anyio.lowlevel.checkpoint()
    third.cancel()
    with pytest.raises(asyncio.CancelledError):
        await third
    assert not gate.returning
    gate.release()
    assert gate.free == 1

    with pytest.raises(ValueError, match="at least one permit"):
        TurnGate(0)
