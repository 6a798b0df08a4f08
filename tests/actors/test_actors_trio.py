"""The generic backend path of ``actors`` (no asyncio loop): run on trio when installed."""

from __future__ import annotations

import importlib.util
from typing import Any

import anyio
import pytest
from actors_toy import ToyEnv, act, instant_policies, run_kwargs

from actors import current_turn, run_episode, run_jobs
from actors._asyncio import running_loop as asyncio_loop
from tests._needs import needs

needs(importlib.util.find_spec("trio"), "trio", "pip install -e '.[test]'")
pytestmark = [pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "trio"


async def test_turns_deadlines_and_late_replies_on_trio() -> None:
    cancelled: list[int] = []

    async def hung(obs: Any, role: str) -> Any:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.append(current_turn().turn)
            raise

    async def shielded(obs: Any, role: str) -> Any:
        with anyio.CancelScope(shield=True):
            await anyio.sleep(0.1)
        return act(role, "late")

    assert asyncio_loop() is None  # the path without an asyncio loop
    trace = await run_episode(ToyEnv(steps=8), policies=instant_policies(), **run_kwargs())
    assert [r.turn for r in trace.turns] == list(range(8)) and trace.status == "ok"

    policies = instant_policies()
    policies["b"], policies["c"] = hung, shielded
    trace = await run_episode(ToyEnv(steps=8), policies=policies, **run_kwargs(turn_timeout=0.05))
    closed = [r for r in trace.turns if r.timed_out]
    assert [r.role for r in closed] == ["b", "c", "b", "c"] and trace.timeouts == 4
    assert all(0.049 <= r.latency_s < 1.0 for r in closed)
    assert cancelled == [1, 5]
    assert all(r.action == act(r.role) for r in trace.turns if not r.timed_out)


async def test_an_answer_after_the_deadline_is_late_on_trio() -> None:
    import time

    def blocks(obs: Any, role: str) -> Any:
        time.sleep(0.08)  # blocks the loop past the deadline
        return act(role, "late")

    policies = instant_policies()
    policies["a"] = blocks
    env = ToyEnv(steps=4)
    trace = await run_episode(env, policies=policies, **run_kwargs(turn_timeout={"a": 0.03}))
    assert trace.turns[0].timed_out and trace.turns[0].error is None
    assert act("a", "late") not in env.applied and trace.timeouts == 1


async def test_batches_on_trio() -> None:
    async def job(steps: int) -> int:
        trace = await run_episode(ToyEnv(steps=steps), policies=instant_policies(), **run_kwargs())
        return len(trace.turns)

    assert await run_jobs([3, 5, 2, 7], job, concurrency=2) == [3, 5, 2, 7]
