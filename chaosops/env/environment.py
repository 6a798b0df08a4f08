"""`ChaosOpsEnvironment`: the turn-based glue around `WorldSim` (docs/world.md, "The environment").

Roles act in turn (`DEFAULT_TURN_ORDER` unless another order is given); each
`step` applies the current role's action, ticks the world, computes the step
reward and returns the next role's view.

Where docs/world.md is silent:

* `reset` and step messages never reveal hidden truth (the failure type, red
  herrings, which fleet action was malicious): they are handed to agents.
* `step` accepts a `ChaosOpsAction` or a mapping that validates as one; the
  caller's action object is never mutated (a copy carries the current role).
* Stepping before `reset`, or after the episode is done, raises
  `EpisodeFinishedError` (a `RuntimeError`) naming the episode.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from chaosops.env.models import (
    AgentRole,
    ChaosOpsAction,
    ChaosOpsObservation,
    ChaosOpsState,
    DifficultyTier,
    FailureType,
)
from chaosops.env.rewards import (
    StepRewardBreakdown,
    step_reward,
    terminal_penalty_if_unresolved,
)
from chaosops.env.world_sim import (
    NO_FLAGS,
    Scenario,
    WorldSim,
)

__all__ = ["DEFAULT_TURN_ORDER", "ChaosOpsEnvironment", "EpisodeFinishedError"]

DEFAULT_TURN_ORDER: tuple[AgentRole, ...] = (
    AgentRole.SRE,
    AgentRole.OVERSIGHT,
    AgentRole.DEV,
    AgentRole.MANAGER,
)

# Only outcomes an on-call engineer could observe go into the step message: whether a
# flagged agent really is the rogue, or a declared root cause the true one, is hidden
# truth, so those two flags are never described (the reward still carries them).
_FLAG_WORDS = (
    ("resolved", "incident resolved"),
    ("wrong_fix", "wrong fix"),
    ("cascade_triggered", "cascade triggered"),
    ("miscommunication", "miscommunication"),
)
_OUT_OF_STEPS = "out of steps, unresolved"
_NO_EFFECT = "no effect noted"


class EpisodeFinishedError(RuntimeError):
    """`step` was called on an episode that is over (or was never started)."""


def _as_action(action: ChaosOpsAction | Mapping[str, Any], role: AgentRole) -> ChaosOpsAction:
    """The action as `role`'s (a copy when it named another role: the caller's
    object is never changed)."""
    if not isinstance(action, ChaosOpsAction):
        return ChaosOpsAction.model_validate({**action, "role": role})
    if action.role is not role:
        return action.model_copy(update={"role": role})
    return action


def _describe(action: ChaosOpsAction) -> str:
    kind = str(action.action_type)  # the member's value (a StrEnum)
    if action.target is None and not action.args:
        return kind
    parts = [kind]
    if action.target is not None:
        target = action.target
        # one line (docs/world.md): a target with a line break or a control character, quoted
        parts.append(target if target.isprintable() else repr(target))
    if action.args:
        parts.append(" ".join(f"{k}={v!r}" for k, v in action.args.items()))
    return " ".join(parts)


def _outcome(flags: dict[str, bool], unresolved: bool) -> str:
    """What an on-call engineer saw come of the step."""
    words = [] if flags == NO_FLAGS else [word for key, word in _FLAG_WORDS if flags[key]]
    if unresolved:
        words.append(_OUT_OF_STEPS)
    return ", ".join(words) or _NO_EFFECT


def _reward_text(reward: float) -> str:
    # 0.0 and -0.0 are one cache key but print differently: zero is never cached.
    return _signed_text(reward) if reward else f"{reward:+.1f}"


@functools.lru_cache(maxsize=4096)
def _signed_text(reward: float) -> str:
    return f"{reward:+.1f}"  # rewards repeat across episodes; formatting a float is slow


class ChaosOpsEnvironment:
    """Turn-based multi-role environment over one `WorldSim`."""

    def __init__(self, turn_order: Sequence[AgentRole | str] | None = None) -> None:
        order = (
            DEFAULT_TURN_ORDER if turn_order is None else tuple(AgentRole(r) for r in turn_order)
        )
        if not order:
            raise ValueError("turn_order must name at least one role")
        self.turn_order: tuple[AgentRole, ...] = order
        self.world = WorldSim()
        self.last_breakdown: StepRewardBreakdown | None = None
        self._default_scenario: Scenario | None = None
        self._turn = 0
        self._started = False
        self._done = False

    # ----------------------------------------------------------- properties
    @property
    def state(self) -> ChaosOpsState:
        """Ground truth of the current episode (never hand this to agents)."""
        return self.world.state

    @property
    def current_role(self) -> AgentRole:
        """The role whose action the next `step` applies."""
        return self.turn_order[self._turn]

    @property
    def scenario(self) -> Scenario | None:
        """The scenario of the current episode."""
        return self.world.scenario

    def set_default_scenario(self, scenario: Scenario | None) -> None:
        """Scenario used by `reset()` without one (as set: `seed` does not change it)."""
        self._default_scenario = scenario

    # -------------------------------------------------------------- episode
    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        scenario: Scenario | None = None,
    ) -> ChaosOpsObservation:
        """Start an episode and return the first role's observation."""
        if scenario is None:
            scenario = self._default_scenario or Scenario.from_type(
                FailureType.DB_DEADLOCK, seed=seed or 0, difficulty=DifficultyTier.EASY
            )
        state = self.world.reset(scenario, episode_id)
        self._turn = 0
        self._started = True
        self._done = False
        self.last_breakdown = None
        role = self.turn_order[0]
        alerts = state.all_alerts
        # str() of these StrEnum members is their value.
        paged = ", ".join(sorted({str(a.service) for a in alerts})) or "none"
        role_name = str(role)
        message = (
            f"Incident open: {len(alerts)} alert(s) firing on {paged}; "
            f"{state.max_steps} steps to resolve; {role_name} acts first."
        )
        return ChaosOpsObservation.model_validate(
            {
                "done": False,
                "reward": 0.0,
                "view": self.world.view_fields(role),
                "step": 0,
                "turn_role": role,
                "message": message,
            },
        )

    def step(self, action: ChaosOpsAction | Mapping[str, Any]) -> ChaosOpsObservation:
        """Apply the current role's action; return the next role's observation."""
        self._check_running()
        role = self.turn_order[self._turn]
        action = _as_action(action, role)
        world = self.world
        flags = world.apply_action(action)
        world.tick()
        reward, unresolved = self._score(flags)
        self._turn = (self._turn + 1) % len(self.turn_order)
        next_role = self.turn_order[self._turn]
        state = world.state
        message = (
            f"step {state.step_count}/{state.max_steps}: {role} {_describe(action)}"
            f" -> {_outcome(flags, unresolved)}; reward {_reward_text(reward)}"
        )
        return ChaosOpsObservation.model_validate(
            {
                "done": self._done,
                "reward": reward,
                "view": world.view_fields(next_role),
                "step": state.step_count,
                "turn_role": next_role,
                "message": message,
            },
        )

    def _check_running(self) -> None:
        if self._done or not self._started:
            episode = self.world.state.episode_id if self._started else None
            raise EpisodeFinishedError(
                f"episode {episode!r} is over; call reset() before stepping again"
                if self._started
                else "no episode started; call reset() before step()"
            )

    def _score(self, flags: dict[str, bool]) -> tuple[float, bool]:
        """The step's reward (kept in the state, the breakdown in `last_breakdown`),
        and whether the episode just ran out of steps unresolved."""
        state = self.world.state
        breakdown, reward = step_reward(state, flags)
        self.last_breakdown = breakdown
        state.cumulative_reward += reward
        if flags["miscommunication"] and state.miscommunications < 1:
            state.miscommunications = 1
        self._done = state.resolved or state.step_count >= state.max_steps
        unresolved = self._done and not state.resolved
        if unresolved:
            state.cumulative_reward += terminal_penalty_if_unresolved(state)
        return reward, unresolved
