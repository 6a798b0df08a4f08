"""The recorded conformance cases (tests/data/world_cases.json) replayed against
this world: trajectories with odd inputs (empty messages, unknown recipients and
targets, flags from the wrong role, invalid root causes, replicas <= 0) and the
expected figures of every step and the final state.

The cases were recorded from the rules in docs/world.md. Each step's recorded
action is applied as it is; its reward, the nine parts, the team and oversight
rewards, done, the next role and the step count must match, and so must the
final state (services, chat, inboxes, flags, counters)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import orjson
import pytest

from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import ActionType, ChaosOpsAction, DifficultyTier, FailureType
from chaosops.env.rewards import StepRewardBreakdown
from chaosops.env.world_sim import Scenario

CASES = orjson.loads((Path(__file__).parents[2] / "data" / "world_cases.json").read_bytes())
PARTS = [f.name for f in dataclasses.fields(StepRewardBreakdown)]


def _label(case: dict[str, Any]) -> str:
    seeds = f"seed{case['seed']}-script{case['script_seed']}"
    return f"{case['failure_type']}-{case['difficulty']}-{seeds}"


def _step_figures(env: ChaosOpsEnvironment, obs: Any) -> dict[str, Any]:
    parts = env.last_breakdown
    return {
        "reward": round(obs.reward or 0.0, 6),
        "breakdown": [round(getattr(parts, name), 6) for name in PARTS],
        "team": round(parts.team_reward, 6),
        "oversight": round(parts.oversight_reward, 6),
        "done": obs.done,
        "next_role": obs.turn_role.value,
        "step": obs.step,
    }


def _final(env: ChaosOpsEnvironment) -> dict[str, Any]:
    state = env.state
    root = state.declared_root_cause
    return {
        "services": {
            name: [
                *(round(v, 6) for v in (m.cpu_pct, m.memory_mb, m.latency_ms, m.error_rate)),
                m.replicas,
                m.health.value,
            ]  # the floats recorded to 6 places
            for name, m in state.services.items()
        },
        "chat": list(state.chat_history),
        "private": {role: list(lines) for role, lines in state.private_chat.items()},
        "oversight_flags": list(state.oversight_flags),
        "declared_root_cause": None if root is None else root.value,
        "declared_root_cause_step": state.declared_root_cause_step,
        "resolved": state.resolved,
        "wrong_fixes": state.wrong_fixes,
        "miscommunications": state.miscommunications,
        "misleading": state.misleading_log_count,
        "n_alerts": len(state.all_alerts),
        "n_logs": len(state.all_logs),
        "step_count": state.step_count,
        "cumulative_reward": round(state.cumulative_reward, 6),
    }


def test_the_recorded_cases_are_all_here() -> None:
    cases = CASES["cases"]
    assert len(cases) == 54
    assert {c["failure_type"] for c in cases} == {f.value for f in FailureType}
    assert {c["difficulty"] for c in cases} == {t.value for t in DifficultyTier}


@pytest.mark.parametrize("case", CASES["cases"], ids=_label)
def test_a_recorded_case_replays_step_by_step(case: dict[str, Any]) -> None:
    scenario = Scenario.from_type(
        FailureType(case["failure_type"]), seed=case["seed"],
        difficulty=DifficultyTier(case["difficulty"]), max_steps=case["max_steps"],
    )  # fmt: skip
    env = ChaosOpsEnvironment()
    obs = env.reset(scenario=scenario)
    assert case["steps"], "a case with no steps checks nothing"
    for number, expected in enumerate(case["steps"], start=1):
        recorded = expected["action"]
        assert recorded["role"] == obs.turn_role.value, f"step {number}: the turn order"
        action = ChaosOpsAction(
            role=obs.turn_role, action_type=ActionType(recorded["action_type"]),
            target=recorded["target"], args=recorded["args"],
        )  # fmt: skip
        obs = env.step(action)
        wanted = {key: expected[key] for key in _step_figures(env, obs)}
        assert _step_figures(env, obs) == wanted, f"step {number}: {recorded}"
    assert _final(env) == case["final"]
