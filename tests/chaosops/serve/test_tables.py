"""The server's tables in process: when a client sees the end of its episode,
and what happens to an episode that is over but not yet wound down."""

from __future__ import annotations

import asyncio

import pytest

from chaosops.env.models import AgentRole, ChaosOpsAction
from chaosops.scenarios import choose_scenario
from chaosops.serve.tables import Seat, Table, TableRules, Tables

pytest.importorskip("openenv")  # chaosops.serve's extra


async def _play_to_the_end(seat: Seat) -> None:
    """Noop at every turn until the seat's episode is over."""
    after = -1
    while True:
        await seat.next_turn(after=after)
        if seat.table.over:
            return
        turn = seat.pending
        assert turn is not None
        seat.answer(turn, ChaosOpsAction(role=turn.role, action_type="noop"))
        after = turn.number


def _tables(ended: list[Table]) -> tuple[Tables, Seat]:
    tables = Tables(TableRules(policies=lambda scenario: {}), on_end=ended.append)
    scenario = choose_scenario(failure_type="db_deadlock", difficulty="easy", max_steps=3)
    return tables, tables.open(scenario, frozenset(AgentRole), "e1")


@pytest.mark.asyncio
async def test_a_client_sees_the_end_before_the_episode_is_wound_down() -> None:
    ended: list[Table] = []
    _, seat = _tables(ended)
    await _play_to_the_end(seat)
    table = seat.table
    assert table.over and not table.done and ended == []  # the runtime still winds down
    assert table.env.observation is not None and table.env.observation.done
    assert table.task is not None
    await table.task
    assert ended == [table] and table.result is not None and table.stopped is None
    assert len(table.result.steps) == 3  # max_steps


@pytest.mark.asyncio
@pytest.mark.parametrize("leave", ["reset", "server_stops"])
async def test_an_episode_over_is_written_though_its_client_leaves_at_once(leave: str) -> None:
    ended: list[Table] = []
    tables, seat = _tables(ended)
    await _play_to_the_end(seat)
    table = seat.table
    if leave == "reset":  # the client's next reset leaves the seat, in the same pass
        tables.leave(seat, "reset for another episode")
        assert table.task is not None
        await asyncio.wait_for(table.task, 5)
    else:
        await asyncio.wait_for(tables.aclose(), 5)
    assert ended == [table] and table.stopped is None and table.result is not None
