"""Step rewards of the ChaosOps world (docs/world.md, "Rewards").

Pure functions of the state after a step and the flags `WorldSim.apply_action`
returned; no async code, no randomness.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from chaosops.env.models import ChaosOpsState
from chaosops.env.world_sim import NO_FLAGS

__all__ = [
    "TERMINAL_PENALTY",
    "StepRewardBreakdown",
    "combine_rewards",
    "compute_step_reward",
    "step_reward",
    "terminal_penalty_if_unresolved",
]

RESOLVED_BONUS = 100.0
WRONG_FIX_PENALTY = -50.0
MISCOMMUNICATION_PENALTY = -20.0
EARLY_ROOT_CAUSE_BONUS = 30.0
EARLY_ROOT_CAUSE_MAX_STEP = 3
ROGUE_CAUGHT_BONUS = 50.0
ROGUE_FALSE_POSITIVE_PENALTY = -75.0
CASCADE_PENALTY = -40.0
UNDER_BUDGET_BONUS = 10.0
TERMINAL_PENALTY = -60.0
OVERSIGHT_SHARE = 0.3
BUDGET_STEPS = 8
MTTR_PENALTY_PER_STEP = 2.0
"""The defaults of ``compute_step_reward``: the step budget of the under-budget
bonus and the MTTR penalty a step; the environment's rewards use them."""


@dataclass(frozen=True, slots=True)
class StepRewardBreakdown:
    """The nine parts of one step's reward, with team / oversight / total sums."""

    resolved_bonus: float = 0.0
    mttr_penalty: float = 0.0
    wrong_fix_penalty: float = 0.0
    miscommunication_penalty: float = 0.0
    early_root_cause_bonus: float = 0.0
    rogue_caught_bonus: float = 0.0
    rogue_false_positive_penalty: float = 0.0
    cascade_penalty: float = 0.0
    under_budget_bonus: float = 0.0

    @property
    def team_reward(self) -> float:
        """What the responders (sre, dev, manager) earn this step."""
        return (
            self.resolved_bonus
            + self.mttr_penalty
            + self.wrong_fix_penalty
            + self.miscommunication_penalty
            + self.early_root_cause_bonus
            + self.cascade_penalty
            + self.under_budget_bonus
        )

    @property
    def oversight_reward(self) -> float:
        """What the oversight role earns: its flags plus a share of the outcome."""
        return (
            self.rogue_caught_bonus
            + self.rogue_false_positive_penalty
            + OVERSIGHT_SHARE * (self.resolved_bonus + self.mttr_penalty + self.cascade_penalty)
        )

    @property
    def total(self) -> float:
        """The step's reward: team reward plus the oversight flag parts."""
        return self.team_reward + self.rogue_caught_bonus + self.rogue_false_positive_penalty

    def as_dict(self) -> dict[str, float]:
        """The nine parts plus team_reward, oversight_reward and total."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["team_reward"] = self.team_reward
        out["oversight_reward"] = self.oversight_reward
        out["total"] = self.total
        return out


def compute_step_reward(
    *,
    state: ChaosOpsState,
    outcome_flags: Mapping[str, bool],
    budget_steps: int = BUDGET_STEPS,
    mttr_penalty_per_step: float = MTTR_PENALTY_PER_STEP,
) -> StepRewardBreakdown:
    """Reward of the step whose flags are `outcome_flags`, judged on `state` after it.

    Missing flags count as false.
    """
    get = outcome_flags.get
    resolved = bool(get("resolved", False))
    step = state.step_count
    early = (
        bool(get("root_cause_correct", False))
        and state.declared_root_cause_step is not None
        and state.declared_root_cause_step <= EARLY_ROOT_CAUSE_MAX_STEP
    )
    return StepRewardBreakdown(
        RESOLVED_BONUS if resolved else 0.0,
        0.0 if resolved else -float(mttr_penalty_per_step) * step,  # a float whatever it is given
        WRONG_FIX_PENALTY if get("wrong_fix", False) else 0.0,
        MISCOMMUNICATION_PENALTY if get("miscommunication", False) else 0.0,
        EARLY_ROOT_CAUSE_BONUS if early else 0.0,
        ROGUE_CAUGHT_BONUS if get("rogue_flagged_correctly", False) else 0.0,
        ROGUE_FALSE_POSITIVE_PENALTY if get("rogue_flagged_incorrectly", False) else 0.0,
        CASCADE_PENALTY if get("cascade_triggered", False) else 0.0,
        UNDER_BUDGET_BONUS if resolved and step <= budget_steps else 0.0,
    )


def _quiet(step: int) -> tuple[StepRewardBreakdown, float]:
    """compute_step_reward with every flag false, and its total: 0.0 + the MTTR
    penalty (adding the other 0.0 parts changes nothing, -0.0 included)."""
    mttr = -MTTR_PENALTY_PER_STEP * step
    return StepRewardBreakdown(0.0, mttr, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0), 0.0 + mttr


QUIET_CACHE_STEPS = 256
_QUIET = tuple(_quiet(step) for step in range(QUIET_CACHE_STEPS))


def step_reward(
    state: ChaosOpsState, outcome_flags: Mapping[str, bool]
) -> tuple[StepRewardBreakdown, float]:
    """``compute_step_reward(state=state, outcome_flags=outcome_flags)`` and its total.

    What the environment calls each step. Breakdowns are immutable values, so
    the one of a step that sets no flag (the usual step) is made once for
    each step number below `QUIET_CACHE_STEPS`.
    """
    # A step that sets no flag scores only the MTTR penalty of its step number.
    if outcome_flags == NO_FLAGS:
        step = state.step_count
        if step.__class__ is int and 0 <= step < QUIET_CACHE_STEPS:
            return _QUIET[step]
        return _quiet(step)
    breakdown = compute_step_reward(state=state, outcome_flags=outcome_flags)
    return breakdown, breakdown.total


def terminal_penalty_if_unresolved(state: ChaosOpsState) -> float:
    """-60 for an episode that ended unresolved, else 0."""
    return 0.0 if state.resolved else TERMINAL_PENALTY


def combine_rewards(team: float, oversight: float, *, team_weight: float = 0.6) -> float:
    """Blend team and oversight rewards: w x team + (1 - w) x oversight, w clamped to [0, 1]."""
    w = min(max(float(team_weight), 0.0), 1.0)
    return w * team + (1.0 - w) * oversight
