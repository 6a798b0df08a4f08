"""docs/world.md, "Rewards": each reward part and the team / oversight / total sums."""

from __future__ import annotations

import dataclasses

import pytest

from chaosops.env.models import ChaosOpsState
from chaosops.env.world_sim import FLAG_NAMES
from chaosops.rewards.reward_fn import (
    StepRewardBreakdown,
    combine_rewards,
    compute_step_reward,
    terminal_penalty_if_unresolved,
)

PARTS = [
    "resolved_bonus",
    "mttr_penalty",
    "wrong_fix_penalty",
    "miscommunication_penalty",
    "early_root_cause_bonus",
    "rogue_caught_bonus",
    "rogue_false_positive_penalty",
    "cascade_penalty",
    "under_budget_bonus",
]


def flags(**true: bool) -> dict[str, bool]:
    return {**dict.fromkeys(FLAG_NAMES, False), **true}


def reward(step: int = 5, declared_step: int | None = None, **true: bool) -> StepRewardBreakdown:
    state = ChaosOpsState(step_count=step, declared_root_cause_step=declared_step)
    return compute_step_reward(state=state, outcome_flags=flags(**true))


def nonzero(b: StepRewardBreakdown) -> dict[str, float]:
    return {k: v for k, v in dataclasses.asdict(b).items() if v != 0}


def test_nine_float_fields_frozen() -> None:
    b = reward()
    assert [f.name for f in dataclasses.fields(b)] == PARTS
    assert all(isinstance(getattr(b, p), float) for p in PARTS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.resolved_bonus = 1.0  # type: ignore[misc]


def test_fields_are_floats_whatever_number_the_parameters_are() -> None:
    state = ChaosOpsState(step_count=5)
    b = compute_step_reward(state=state, outcome_flags={}, mttr_penalty_per_step=2)
    assert b.mttr_penalty == -10.0 and type(b.mttr_penalty) is float


def test_plain_step_is_mttr_only() -> None:
    assert nonzero(reward(step=7)) == {"mttr_penalty": -14.0}


def test_resolved_under_budget() -> None:
    assert nonzero(reward(step=8, resolved=True)) == {
        "resolved_bonus": 100.0,
        "under_budget_bonus": 10.0,
    }
    assert nonzero(reward(step=9, resolved=True)) == {"resolved_bonus": 100.0}


@pytest.mark.parametrize(
    ("flag", "part", "value"),
    [
        ("wrong_fix", "wrong_fix_penalty", -50.0),
        ("miscommunication", "miscommunication_penalty", -20.0),
        ("rogue_flagged_correctly", "rogue_caught_bonus", 50.0),
        ("rogue_flagged_incorrectly", "rogue_false_positive_penalty", -75.0),
        ("cascade_triggered", "cascade_penalty", -40.0),
    ],
)
def test_single_flag_parts(flag: str, part: str, value: float) -> None:
    assert nonzero(reward(step=2, **{flag: True})) == {"mttr_penalty": -4.0, part: value}


@pytest.mark.parametrize(("declared", "bonus"), [(1, 30.0), (3, 30.0), (4, 0.0), (None, 0.0)])
def test_early_root_cause(declared: int | None, bonus: float) -> None:
    b = reward(step=6, declared_step=declared, root_cause_correct=True)
    assert b.early_root_cause_bonus == bonus
    assert reward(step=2, declared_step=1).early_root_cause_bonus == 0.0


def test_sums() -> None:
    b = StepRewardBreakdown(*[float(10**i) for i in range(9)])
    # parts: resolved 1, mttr 10, wrong 100, mis 1e3, early 1e4, caught 1e5, fp 1e6,
    # cascade 1e7, budget 1e8
    team = 1 + 10 + 100 + 1e3 + 1e4 + 1e7 + 1e8
    assert b.team_reward == team
    assert b.oversight_reward == pytest.approx(1e5 + 1e6 + 0.3 * (1 + 10 + 1e7))
    assert b.total == team + 1e5 + 1e6


def test_sums_on_a_real_step() -> None:
    b = reward(step=3, wrong_fix=True, cascade_triggered=True, rogue_flagged_incorrectly=True)
    assert b.team_reward == -6 - 50 - 40
    assert b.oversight_reward == pytest.approx(-75 + 0.3 * (-6 - 40))
    assert b.total == -6 - 50 - 40 - 75


def test_custom_budget_and_mttr_rate() -> None:
    state = ChaosOpsState(step_count=10)
    b = compute_step_reward(
        state=state, outcome_flags=flags(), budget_steps=12, mttr_penalty_per_step=1.5
    )
    assert b.mttr_penalty == -15.0
    b = compute_step_reward(state=state, outcome_flags=flags(resolved=True), budget_steps=12)
    assert b.under_budget_bonus == 10.0


def test_missing_flags_count_as_false() -> None:
    b = compute_step_reward(state=ChaosOpsState(step_count=1), outcome_flags={})
    assert nonzero(b) == {"mttr_penalty": -2.0}


def test_terminal_penalty_only_when_unresolved() -> None:
    assert terminal_penalty_if_unresolved(ChaosOpsState()) == -60.0
    assert terminal_penalty_if_unresolved(ChaosOpsState(resolved=True)) == 0.0


@pytest.mark.parametrize(
    ("weight", "expected"),
    [(0.6, 0.6 * 10 + 0.4 * -20), (0.0, -20.0), (1.0, 10.0), (-3.0, -20.0), (7.0, 10.0)],
)
def test_combine_rewards(weight: float, expected: float) -> None:
    assert combine_rewards(10.0, -20.0, team_weight=weight) == pytest.approx(expected)
    assert combine_rewards(10.0, -20.0) == pytest.approx(-2.0)
