"""The reward function, at the path docs/world.md gives it: the world's own
rewards (:mod:`chaosops.env.rewards`), which the environment scores with."""

from __future__ import annotations

from chaosops.env.rewards import (
    TERMINAL_PENALTY,
    StepRewardBreakdown,
    combine_rewards,
    compute_step_reward,
    step_reward,
    terminal_penalty_if_unresolved,
)

__all__ = [
    "TERMINAL_PENALTY",
    "StepRewardBreakdown",
    "combine_rewards",
    "compute_step_reward",
    "step_reward",
    "terminal_penalty_if_unresolved",
]
