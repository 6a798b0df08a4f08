"""How run_batches hands over episodes played while the LLM endpoint was failing."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction, FailureType
from chaosops.env.world_sim import Scenario
from chaosops.runs.batches import Batch, run_batches


class Endpoint:
    """A stand-in for the LLM policy's endpoint: the scenarios whose seed is in
    ``down`` fail every call (an errored turn), and ``failures_in_a_row``
    counts them as LLMPolicy does; any other call succeeds and resets it."""

    def __init__(self, down: set[int], delay: float = 0.0) -> None:
        self.down = down
        self.delay = delay
        self.failures_in_a_row = 0

    def factory(self, scenario: Scenario) -> dict[Any, Any]:
        async def policy(observation: Any, role: Any) -> ChaosOpsAction:
            await anyio.sleep(self.delay)
            if scenario.seed in self.down:
                self.failures_in_a_row += 1
                raise RuntimeError("LLMRequestError: HTTP 500")
            self.failures_in_a_row = 0
            return ChaosOpsAction(role=role, action_type=ActionType.NOOP)

        return dict.fromkeys(AgentRole, policy)


def scenarios(count: int) -> list[Scenario]:
    return [Scenario.from_type(FailureType.DB_DEADLOCK, seed=i, max_steps=2) for i in range(count)]


@pytest.mark.asyncio
async def test_an_episode_played_during_a_passing_outage_is_handed_over_after_it() -> None:
    # Episode 1's calls all fail; episode 2's first call succeeds: episode 1
    # is held until then, and every episode is handed over (none withheld).
    endpoint = Endpoint(down={1})
    batch = Batch(scenarios(3), [0, 1, 2], endpoint.factory, None)
    handed: list[tuple[int, int, int]] = []  # (index, errors, failures in a row then)
    stop = await run_batches(
        [batch],
        concurrency=1,
        on_result=lambda b, index, result: handed.append(
            (index, result.errors, endpoint.failures_in_a_row)
        ),
        failing=lambda: endpoint.failures_in_a_row > 0,
    )
    assert stop.reason is None and stop.withheld == 0
    assert [index for index, _, _ in handed] == [0, 1, 2] and handed[1][1] > 0
    # episode 1 went out once the endpoint answered again, not during its failures
    assert [failures for _, _, failures in handed] == [0, 0, 0]


@pytest.mark.asyncio
async def test_the_outage_that_stops_the_run_keeps_none_of_its_episodes() -> None:
    # From episode 1 on every call fails; the health check stops the run once
    # 12 calls in a row failed (episode 1 has 8 turns: it finishes first).
    # Only episode 0 is handed over; the errored ones that finished are withheld.
    endpoint = Endpoint(down=set(range(1, 40)), delay=0.01)
    batch = Batch(scenarios(40), list(range(40)), endpoint.factory, None)
    handed: list[int] = []

    def health() -> str | None:
        return "endpoint down" if endpoint.failures_in_a_row >= 12 else None

    with anyio.fail_after(30):
        stop = await run_batches(
            [batch],
            concurrency=1,
            on_result=lambda b, index, result: handed.append(index),
            health=health,
            failing=lambda: endpoint.failures_in_a_row > 0,
        )
    assert stop.reason == "endpoint down"
    assert handed == [0]
    assert 1 <= stop.withheld < 39


@pytest.mark.asyncio
async def test_without_a_failing_check_every_episode_is_handed_over_at_once() -> None:
    endpoint = Endpoint(down={1})
    batch = Batch(scenarios(3), [0, 1, 2], endpoint.factory, None)
    handed: list[int] = []
    stop = await run_batches(
        [batch], concurrency=1, on_result=lambda b, index, result: handed.append(index)
    )
    assert handed == [0, 1, 2] and stop.withheld == 0
