"""What the runner returns: each applied step, and each episode's outcome."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chaosops.env.models import AgentRole, ChaosOpsAction, ChaosOpsObservation, FailureType
from chaosops.env.rewards import StepRewardBreakdown
from chaosops.env.world_sim import Scenario

__all__ = ["EpisodeResult", "EpisodeStep"]


@dataclass(slots=True, eq=False)
class EpisodeStep:
    """One applied step: what ``role`` saw, the action applied, what it earned.

    ``action`` is noop when the turn timed out (``timed_out``) or the policy
    failed (``error``); ``latency_s`` runs from sending the observation to
    closing the turn; ``info`` holds the policy's annotations (LLM prompt,
    completion, usage, token ids...).
    """

    turn: int
    role: AgentRole
    observation: ChaosOpsObservation
    action: ChaosOpsAction
    reward: float
    breakdown: StepRewardBreakdown | None
    done: bool
    timed_out: bool = False
    error: str | None = None
    latency_s: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class EpisodeResult:
    """The outcome of one episode (ground truth read from the environment at the end)."""

    scenario: Scenario
    steps: list[EpisodeStep]
    resolved: bool
    final_step: int
    cumulative_reward: float
    wrong_fixes: int
    oversight_flags: list[str]
    declared_root_cause: FailureType | None
    episode_id: str = ""
    status: str = "ok"
    error: str | None = None
    timeouts: int = 0
    errors: int = 0
    wall_s: float = 0.0

    @classmethod
    def from_state(
        cls, scenario: Scenario, steps: list[EpisodeStep], state: Any, **fields: Any
    ) -> EpisodeResult:
        """The result read off the environment's final ``state`` (None: it never
        started, nothing to read); ``fields`` are the others (episode_id, status...)."""
        return cls(
            scenario=scenario,
            steps=steps,
            resolved=bool(state and state.resolved),
            final_step=state.step_count if state else 0,
            cumulative_reward=state.cumulative_reward if state else 0.0,
            wrong_fixes=state.wrong_fixes if state else 0,
            oversight_flags=list(state.oversight_flags) if state else [],
            declared_root_cause=state.declared_root_cause if state else None,
            **fields,
        )

    @property
    def terminated(self) -> bool:
        """Ended in a terminal state: the incident resolved (the RL sense)."""
        return self.status == "ok" and self.resolved

    @property
    def truncated(self) -> bool:
        """Cut unresolved at its step limit: not a terminal state (the RL sense).
        A failed episode is neither terminated nor truncated."""
        return self.status == "ok" and not self.resolved

    @property
    def mttr_steps(self) -> int:
        """Steps to resolution, or -1 when unresolved."""
        return self.final_step if self.resolved else -1
