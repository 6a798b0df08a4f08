"""One role of an episode played from outside, the other roles by policies.

:class:`RolePlay` is what the trainers' adapters share (TRL's tool
environment, PettingZoo's environment): it holds an episode, plays the moves
it is given for the trained role, and lets the configured policies play the
other roles until it is the trained role's turn again or the episode ends.
:meth:`RolePlay.finish` plays an abandoned episode to its end, the trained
role's remaining turns as the runtime plays a late turn (``noop``), so that an
episode is always scored as a whole: stopping early never escapes the
unresolved-end penalty or the time the incident lasted.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass, field
from typing import Any

from chaosops.agents.policies import Others, Policy, policies_for
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import AgentRole, ChaosOpsAction, ChaosOpsObservation
from chaosops.env.results import EpisodeResult, EpisodeStep
from chaosops.env.rules import IllegalMove, view_problem
from chaosops.env.world_sim import Scenario

__all__ = ["RolePlay"]


@dataclass
class RolePlay:
    """An episode in which ``roles`` are played from outside."""

    others: Others = "heuristic"
    env: ChaosOpsEnvironment = field(default_factory=ChaosOpsEnvironment)
    roles: frozenset[AgentRole] = frozenset()
    observation: ChaosOpsObservation | None = None
    reward_since: float = 0.0  # the reward of the moves since the trained side's last one
    steps: list[EpisodeStep] = field(default_factory=list)
    scenario: Scenario | None = None
    _policies: dict[AgentRole, Policy] = field(default_factory=dict)
    _loop: asyncio.AbstractEventLoop | None = None

    def start(
        self, scenario: Scenario, roles: frozenset[AgentRole], episode_id: str | None = None
    ) -> ChaosOpsObservation:
        """Reset to ``scenario``; play the other roles up to the first turn of ``roles``."""
        self.roles, self.scenario, self.steps = roles, scenario, []
        self._policies = policies_for(self.others, scenario)
        self.observation = self.env.reset(scenario=scenario, episode_id=episode_id)
        self.reward_since = 0.0
        return self._others_play()

    @property
    def done(self) -> bool:
        return self.observation is None or self.observation.done

    def check(self, action: ChaosOpsAction) -> None:
        """Raise :class:`IllegalMove` unless ``action`` is legal now."""
        if self.observation is None:
            raise IllegalMove("no episode yet: reset() first")
        if self.observation.done:
            raise IllegalMove("the episode is over: reset() to start another")
        problem = view_problem(action, self.observation)
        if problem is not None:
            raise IllegalMove(f"illegal move: {problem}")

    def play(self, action: ChaosOpsAction) -> ChaosOpsObservation:
        """Play the trained role's legal ``action``, then the others' turns."""
        self.check(action)
        self.reward_since = 0.0
        self._step(action)
        return self._others_play()

    def finish(self) -> int:
        """Play the episode to its end, the trained roles' turns as the
        fallback (``noop``); how many of their turns the fallback played."""
        fallbacks = 0
        while not self.done:
            assert self.observation is not None
            self._step(ChaosOpsAction(role=self.observation.turn_role, action_type="noop"))
            fallbacks += 1
            self._others_play()
        return fallbacks

    def _step(self, action: ChaosOpsAction) -> None:
        before, seen = self.env.state.cumulative_reward, self.observation
        assert seen is not None, "start() first"
        self.observation = obs = self.env.step(action)
        # the episode's reward grew by the step's, and an unresolved end's penalty
        self.reward_since += self.env.state.cumulative_reward - before
        self.steps.append(EpisodeStep(
            turn=len(self.steps), role=seen.turn_role, observation=seen,
            action=action.model_copy(update={"role": seen.turn_role}),
            reward=obs.reward or 0.0, breakdown=self.env.last_breakdown, done=obs.done,
        ))  # fmt: skip

    def result(self) -> EpisodeResult:
        """The episode so far, as the runner reports one."""
        state = self.env.state
        assert self.scenario is not None, "start() first"
        return EpisodeResult.from_state(
            self.scenario, list(self.steps), state, episode_id=state.episode_id or ""
        )

    def _others_play(self) -> ChaosOpsObservation:
        obs = self.observation
        assert obs is not None
        while not obs.done and obs.turn_role not in self.roles:
            policy = self._policies.get(obs.turn_role)
            if policy is None:
                action = ChaosOpsAction(role=obs.turn_role, action_type="noop")
            else:
                action = self._answer(policy(obs, obs.turn_role))
            self._step(action)
            obs = self.env_observation()
        return obs

    def env_observation(self) -> ChaosOpsObservation:
        """The observation now (there is one once the play started)."""
        assert self.observation is not None, "start() first"
        return self.observation

    def _answer(self, answer: Any) -> ChaosOpsAction:
        """A policy's answer; an async policy's is awaited on this play's own loop."""
        if inspect.isawaitable(answer):
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
            answer = self._loop.run_until_complete(answer)
        return answer

    def close(self) -> None:
        if self._loop is not None:
            self._loop.close()
            self._loop = None
        self.observation = None
