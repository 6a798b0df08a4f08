"""ChaosOps as TRL's ``environment_factory``: one role trained, the others scripted.

``GRPOTrainer(..., environment_factory=ChaosOpsToolEnv)`` builds one
environment per rollout slot, calls ``reset(**row)`` with a dataset row
(:func:`chaosops.train.dataset` makes them), offers every public method as a
tool, and scores a rollout with :meth:`ChaosOpsToolEnv.get_reward`. A tool
call plays the trained role's move, then the other roles' turns, and returns
what the trained role sees next. An illegal move, or one after the end, raises
:class:`~chaosops.train.play.IllegalMove`, whose message TRL hands back to the
model.
"""

from __future__ import annotations

from typing import Any

from chaosops._extras import require
from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction
from chaosops.env.world_sim import Scenario

from .play import Others, RolePlay, describe, scenario_of

__all__ = ["ChaosOpsToolEnv"]

_REWARD = "Reward since your last move (the others' moves included): "


def _shown(text: str, reward: float) -> str:
    return f"{text}\n{_REWARD}{reward:+.2f}."


class _Local:
    """The episode in this process: ``others`` play the roles not trained."""

    def __init__(self, others: Others) -> None:
        self.play = RolePlay(others=others)

    def start(self, scenario: Scenario, role: AgentRole) -> tuple[str, float]:
        obs = self.play.start(scenario, frozenset({role}))
        return describe(obs, role), self.play.reward_since

    def move(self, action: ChaosOpsAction) -> tuple[str, float]:
        obs = self.play.play(action)
        return describe(obs, AgentRole(action.role)), self.play.reward_since

    def reward(self) -> float:
        return float(self.play.env.state.cumulative_reward)

    @property
    def done(self) -> bool:
        return self.play.done

    def close(self) -> None:
        self.play.close()


class ChaosOpsToolEnv:
    """One ChaosOps episode a model plays through tools, as one role.

    ``others`` plays the other roles: a scripted policy's name (``random``,
    ``heuristic``, ``oracle``), a policy ``(observation, role) -> action``
    (async ones too), or a map from role to either. Default: heuristic.
    With ``base_url``, the episode is played on a ``chaosops serve`` server
    instead, whose own policies play the other roles (the serve extra).
    """

    def __init__(self, others: Others = "heuristic", base_url: str | None = None) -> None:
        if base_url is None:
            self._world: Any = _Local(others)
        else:
            require("openenv", "serve", "ChaosOpsToolEnv(base_url=...)")
            from chaosops.serve.client import ServedEpisode  # the serve extra's

            self._world = ServedEpisode(base_url)
        self._role = AgentRole.SRE
        # TRL offers every public function of the class as a tool: close() is
        # the instance's own, so that a model is never offered it.
        self.close = self._close

    def reset(
        self,
        failure_type: str = "db_deadlock",
        difficulty: str = "easy",
        seed: int = 0,
        max_steps: int | None = None,
        role: str = "sre",
        **columns: Any,
    ) -> str:
        """Start the episode a dataset row names; the first observation as text.

        Columns other than these (``prompt``, say) are the trainer's and ignored.
        """
        self._role = AgentRole(role)
        scenario = scenario_of(failure_type, difficulty, seed, max_steps)
        return _shown(*self._world.start(scenario, self._role))

    def _move(self, kind: ActionType, target: str | None = None, **args: Any) -> str:
        action = ChaosOpsAction(role=self._role, action_type=kind, target=target, args=args)
        return _shown(*self._world.move(action))

    def restart(self, service: str) -> str:
        """Restart a service: heals it when a restart is its fix, else counts as a wrong fix.

        Args:
            service: The service to restart, one the view shows.
        """
        return self._move(ActionType.RESTART, service)

    def rollback(self, service: str) -> str:
        """Roll a service back to its previous release.

        Args:
            service: The service to roll back, one the view shows.
        """
        return self._move(ActionType.ROLLBACK, service)

    def scale(self, service: str, replicas: int) -> str:
        """Set a service's replica count.

        Args:
            service: The service to scale, one the view shows.
            replicas: How many replicas it should run, 1 to 20.
        """
        return self._move(ActionType.SCALE, service, replicas=replicas)

    def flag_rogue(self, agent_name: str) -> str:
        """Flag a fleet agent as rogue (the oversight role only).

        Args:
            agent_name: The fleet agent: autoscaler, load_balancer or deploy_bot.
        """
        return self._move(ActionType.FLAG_ROGUE, agent_name)

    def identify_root_cause(self, failure_type: str) -> str:
        """Declare the incident's root cause.

        Args:
            failure_type: One of the nine failure types, e.g. db_deadlock or memory_leak.
        """
        return self._move(ActionType.IDENTIFY_ROOT_CAUSE, failure_type=failure_type)

    def communicate(self, message: str, to: str = "all") -> str:
        """Send a message to the shared channel or to one role.

        Args:
            message: What to say, 1 to 200 characters.
            to: "all", or a role: sre, oversight, dev or manager.
        """
        return self._move(ActionType.COMMUNICATE, message=message, to=to)

    def escalate(self) -> str:
        """Escalate the incident (no effect on the world)."""
        return self._move(ActionType.ESCALATE)

    def resolve(self) -> str:
        """Declare the incident resolved (the manager only)."""
        return self._move(ActionType.RESOLVE)

    def noop(self) -> str:
        """Do nothing this turn."""
        return self._move(ActionType.NOOP)

    def get_reward(self) -> float:
        """The episode's reward so far: every step's, and the penalty of an unresolved end."""
        return self._world.reward()

    @property
    def done(self) -> bool:
        """Whether the episode ended (resolved, or out of steps)."""
        return self._world.done

    def _close(self) -> None:
        self._world.close()

    def __enter__(self) -> ChaosOpsToolEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()
