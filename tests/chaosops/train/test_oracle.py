"""The seat's oracle, the yardstick of a trained seat's credit: no move
played every turn, nor a declaration repeated, earns a seat more credit on
any canonical row, and a move the world pays again counts once."""

from __future__ import annotations

import pytest

from chaosops.agents.policies import oracle_policy
from chaosops.agents.runner import run_batch
from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction
from chaosops.env.world_sim import Scenario
from chaosops.train import held_out_scenarios
from chaosops.train.oracle import knowing_plans, seat_credits, seat_oracle_credits
from chaosops.train.pettingzoo import MOVES
from chaosops.train.trl import repaid

ROWS = held_out_scenarios()


def _every_turn(move: dict):
    return lambda scenario: lambda obs, role: ChaosOpsAction(role=role, **move)


@pytest.mark.parametrize("role", [r.value for r in AgentRole])
def test_no_constant_move_earns_a_seat_more_than_its_oracle_on_any_row(role: str) -> None:
    oracle = seat_oracle_credits(ROWS, role)
    beaten = []
    for move in MOVES:
        for scenario, mine, best in zip(ROWS, seat_credits(ROWS, role, _every_turn(move)),
                                        oracle, strict=True):  # fmt: skip
            if mine > best + 1e-9:
                beaten.append((move, scenario.failure_type, scenario.seed, mine, best))
    assert not beaten


def test_the_sre_oracle_escalates_the_misrouted_traffic_the_heuristic_leaves() -> None:
    rows = [sc for sc in ROWS if sc.failure_type == "misrouted_traffic"]
    plans = knowing_plans("misrouted_traffic", "sre")
    kinds = {tuple(move.action_type for move in plan) for plan in plans}
    assert (ActionType.IDENTIFY_ROOT_CAUSE, ActionType.ESCALATE) in kinds
    assert all(move.action_type is not ActionType.FLAG_ROGUE for p in plans for move in p)
    team_plan = seat_credits(rows, "sre", lambda sc: oracle_policy(sc.failure_type))
    assert min(a - b for a, b in zip(seat_oracle_credits(rows, "sre"), team_plan,
                                     strict=True)) > 100  # fmt: skip


def test_a_repeated_flag_and_a_repeated_declaration_are_paid_once() -> None:
    scenario = Scenario.from_type("rogue_deploy_bot", seed=3)  # nobody fixes: it runs out
    oracle = oracle_policy("rogue_deploy_bot")
    noop = lambda obs, role: ChaosOpsAction(role=role, action_type="noop")  # noqa: E731
    players = {AgentRole.SRE: oracle, AgentRole.OVERSIGHT: oracle,
               AgentRole.DEV: noop, AgentRole.MANAGER: noop}  # fmt: skip
    (result,) = run_batch([scenario], lambda sc: players)
    flags = sum(1 for s in result.steps if s.breakdown and s.breakdown.rogue_caught_bonus)
    bonuses = sum(1 for s in result.steps if s.breakdown and s.breakdown.early_root_cause_bonus)
    assert flags >= 2
    assert repaid(result) == pytest.approx(50.0 * (flags - 1) + 30.0 * (bonuses - 1))
