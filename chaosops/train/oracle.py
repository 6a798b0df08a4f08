"""The yardstick of a trained seat's credit: the best the seat can earn
knowing the failure, whoever plays the other seats.

The world's oracle is a team plan: each role plays its own move of the
failure's fix. A seat trained beside teammates that are no oracle (the
heuristic, say) can do better than its share of that plan: escalate a
misrouted incident the heuristic manager never escalates, roll back before
the deploy bot is flagged. So a seat's oracle here is the best of its
*knowing plans*: every ordering of the moves the failure's fix offers the
role (the true cause declared, the plan's moves its role may make), played
in that order, the last repeated until the episode ends. Each plan is played
on the row, and the best credit counts.

Credit is the trainers' (:mod:`chaosops.train.rewards`): the return, a move
the world pays again on repetition counted once, less the return of the row
with the seat playing the fallback every turn.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import Any

from chaosops.agents.policies import Policy, policies_for
from chaosops.agents.runner import run_batch
from chaosops.env.failures import FAILURES
from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction, FailureType
from chaosops.env.world_sim import Scenario

from .trl import fallback_return, repaid

__all__ = ["knowing_plans", "seat_credits", "seat_oracle_credits"]

_ONLY_BY = MappingProxyType(
    {ActionType.FLAG_ROGUE: AgentRole.OVERSIGHT, ActionType.RESOLVE: AgentRole.MANAGER}
)
"""Moves that count only from one role: from any other they are miscommunications."""


def knowing_plans(failure: FailureType | str, role: AgentRole | str) -> list[list[ChaosOpsAction]]:
    """Every ordering of every non-empty set of the moves the fix of
    ``failure`` offers ``role``: the declaration of the true cause and each
    move of the oracle's plan that counts from ``role``."""
    failure, role = FailureType(failure), AgentRole(role)
    moves = [ChaosOpsAction(role=role, action_type=ActionType.IDENTIFY_ROOT_CAUSE,
                            args={"failure_type": failure.value})]  # fmt: skip
    for move in FAILURES[failure].plan:
        if _ONLY_BY.get(move.kind, role) is role:
            moves.append(ChaosOpsAction(role=role, action_type=move.kind, target=move.target,
                                        args=dict(move.args)))  # fmt: skip
    return [list(order) for size in range(1, len(moves) + 1)
            for order in itertools.permutations(moves, size)]  # fmt: skip


def _played(plan: Sequence[ChaosOpsAction]) -> Policy:
    """A policy playing ``plan`` in order, then its last move every turn."""
    turns = itertools.count()

    def policy(observation: Any, role: AgentRole) -> ChaosOpsAction:
        return plan[min(next(turns), len(plan) - 1)]

    return policy


def _maker(plan: Sequence[ChaosOpsAction]) -> Callable[[Scenario], Policy]:
    return lambda scenario: _played(plan)


def seat_credits(
    scenarios: Sequence[Scenario],
    role: AgentRole | str,
    make: Callable[[Scenario], Policy],
    others: str = "heuristic",
) -> list[float]:
    """The seat's credit on each of ``scenarios``, ``make(scenario)`` its
    policy and the scripted policy ``others`` in the other seats."""
    role = AgentRole(role)

    def players(scenario: Scenario) -> dict[AgentRole | str, Any]:
        chosen: dict[AgentRole | str, Any] = {
            r: p for r, p in policies_for(others, scenario).items()
        }
        chosen[role] = make(scenario)
        return chosen

    results = run_batch(list(scenarios), players)
    return [
        r.cumulative_reward - repaid(r) - (fallback_return(others, sc, role) or 0.0)
        for r, sc in zip(results, scenarios, strict=True)
    ]


def seat_oracle_credits(
    scenarios: Sequence[Scenario], role: AgentRole | str, others: str = "heuristic"
) -> list[float]:
    """The best credit of the seat's knowing plans on each of ``scenarios``."""
    best = [float("-inf")] * len(scenarios)
    by_failure: dict[FailureType, list[int]] = {}
    for i, scenario in enumerate(scenarios):
        by_failure.setdefault(FailureType(scenario.failure_type), []).append(i)
    for failure, rows in by_failure.items():
        chosen = [scenarios[i] for i in rows]
        for plan in knowing_plans(failure, role):
            credits = seat_credits(chosen, role, _maker(plan), others)
            for i, credit in zip(rows, credits, strict=True):
                best[i] = max(best[i], credit)
    return best
