"""ChaosOps as an OpenEnv ``Environment``: the client plays some roles, the
server's policies the others.

``reset`` takes a scenario and the roles the client plays (all four by
default); the other roles are played on the server by ``others`` (scripted
policies, or any policy). Each observation is for the client's role whose
turn it is, names that turn, and carries the reward earned since the client's
last step: its own move and the moves the server played since. A step names
the turn it answers: a step for another turn is refused and never applied,
as is a move that is no legal move of the view (checked as LLM answers are).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openenv.core.env_server import Action, Environment, Observation, State
from pydantic import Field

from chaosops.env.models import AgentRole, ChaosOpsAction
from chaosops.train.play import IllegalMove, Others, RolePlay, describe, scenario_of

from .runs import ServedRuns

__all__ = ["ChaosOpsServerEnv", "StepRefused", "TurnAction", "TurnObservation", "TurnState"]


class StepRefused(ValueError):
    """A reset or step the server does not apply; its message opens with a code
    (``NO_EPISODE``, ``EPISODE_OVER``, ``WRONG_TURN``, ``ILLEGAL_MOVE``,
    ``UNKNOWN_ROLE``, ``BAD_SCENARIO``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class TurnAction(Action):
    """One move of the client's role, answering the turn it names."""

    turn: int = Field(description="the turn this move answers: the observation's turn")
    action_type: str = Field(description="restart, rollback, scale, flag_rogue, ...")
    target: str | None = Field(default=None, description="a service or a fleet agent")
    args: dict[str, Any] = Field(default_factory=dict, description="the action's arguments")


class TurnObservation(Observation):
    """What the client's role whose turn it is sees."""

    episode_id: str = ""
    turn: int = Field(default=0, description="the turn to answer (the steps applied so far)")
    role: str = Field(default="", description="the client's role to move")
    terminated: bool = Field(default=False, description="ended resolved (a terminal state)")
    truncated: bool = Field(default=False, description="cut at max_steps unresolved")
    text: str = Field(default="", description="the view rendered for a model, with its moves")
    view: dict[str, Any] = Field(default_factory=dict, description="the role's view (RoleView)")


class TurnState(State):
    """The episode as the server holds it (no hidden ground truth)."""

    roles: list[str] = Field(default_factory=list)
    done: bool = False
    cumulative_reward: float = 0.0


class ChaosOpsServerEnv(Environment[TurnAction, TurnObservation, TurnState]):
    """One session's episode; ``others`` plays the roles the client leaves."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, others: Others = "heuristic", runs: ServedRuns | None = None) -> None:
        super().__init__()
        self._play = RolePlay(others=others)
        self._others = others
        self._runs = runs  # where finished episodes are written, if anywhere
        self._started = False
        self._written = False
        self._last_role = AgentRole.SRE

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        failure_type: str = "db_deadlock",
        difficulty: str = "easy",
        max_steps: int | None = None,
        roles: list[str] | None = None,
        **kwargs: Any,
    ) -> TurnObservation:
        names = [role.value for role in AgentRole]
        if unknown := sorted(set(roles or ()) - set(names)):
            raise StepRefused("UNKNOWN_ROLE", f"{unknown}: the roles are {', '.join(names)}")
        try:
            scenario = scenario_of(failure_type, difficulty, seed or 0, max_steps)
        except ValueError as exc:
            raise StepRefused("BAD_SCENARIO", str(exc)) from None
        played = frozenset(AgentRole(r) for r in (roles or names))
        self._play.start(scenario, played, episode_id)
        self._started, self._written = True, False
        # whose view an ended episode shows: the client's role that moved last
        self._last_role = next(r for r in self._play.env.turn_order if r in played)
        self._write_if_over()  # the server's roles may end it before the client moves
        return self._observation()

    def step(
        self, action: TurnAction, timeout_s: float | None = None, **kwargs: Any
    ) -> TurnObservation:
        obs = self._play.observation
        if not self._started or obs is None:
            raise StepRefused("NO_EPISODE", "no episode yet: reset first")
        if obs.done:
            raise StepRefused("EPISODE_OVER", "the episode is over: reset to start another")
        if action.turn != obs.step:
            raise StepRefused(
                "WRONG_TURN", f"this step answers turn {action.turn}, the open turn is {obs.step}"
            )
        self._last_role = obs.turn_role
        move = ChaosOpsAction(role=obs.turn_role, action_type=action.action_type,
                              target=action.target, args=action.args)  # fmt: skip
        try:
            self._play.play(move)
        except IllegalMove as exc:
            raise StepRefused("ILLEGAL_MOVE", str(exc).removeprefix("illegal move: ")) from None
        self._write_if_over()
        return self._observation()

    # The server's policies are scripted, and a step costs tens of microseconds:
    # played on the event loop, it spares each step a hop to a worker thread.
    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> TurnObservation:
        return self.reset(seed=seed, episode_id=episode_id, **kwargs)

    async def step_async(
        self, action: TurnAction, timeout_s: float | None = None, **kwargs: Any
    ) -> TurnObservation:
        return self.step(action, timeout_s=timeout_s, **kwargs)

    def _write_if_over(self) -> None:
        """An episode that just ended goes to the run folder, once."""
        if self._play.done and self._runs is not None and not self._written:
            self._written = True
            self._runs.write(self._play.result(), self._played_by())

    def _observation(self) -> TurnObservation:
        obs = self._play.observation
        assert obs is not None
        state = self._play.env.state
        role = self._last_role if obs.done else obs.turn_role
        return TurnObservation(
            done=obs.done, reward=self._play.reward_since, episode_id=state.episode_id or "",
            turn=obs.step, role=role.value, terminated=obs.done and state.resolved,
            truncated=obs.done and not state.resolved, text=describe(obs, role),
            view=obs.view.model_dump(mode="json"),
        )  # fmt: skip

    def _played_by(self) -> dict[str, str]:
        """What played each role: the client, or the server's policy (by name)."""

        def name(role: AgentRole) -> str:
            others = self._others
            policy = others.get(role.value) if isinstance(others, Mapping) else others
            return policy if isinstance(policy, str) else getattr(policy, "__name__", "policy")

        return {r.value: "client" if r in self._play.roles else name(r) for r in AgentRole}

    @property
    def state(self) -> TurnState:
        state = self._play.env.state
        return TurnState(
            episode_id=state.episode_id, step_count=state.step_count,
            roles=sorted(r.value for r in self._play.roles), done=self._play.done,
            cumulative_reward=state.cumulative_reward,
        )  # fmt: skip

    def close(self) -> None:
        self._play.close()
