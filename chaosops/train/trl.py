"""ChaosOps as TRL's ``environment_factory``: one role trained, the others scripted.

``GRPOTrainer(..., environment_factory=ChaosOpsToolEnv)`` builds one
environment per rollout slot, calls ``reset(**row)`` with a dataset row
(:func:`chaosops.train.dataset` makes them), offers every public method as a
tool, and scores a rollout with :meth:`ChaosOpsToolEnv.get_reward`. A tool
call plays the trained role's move, then the other roles' turns, and answers
with what changed in the trained role's view. An illegal move, or one after
the end, raises :class:`~chaosops.env.rules.IllegalMove`, whose message TRL
hands back to the model.

The reward is always that of a whole episode: when the rollout stops (no
more calls, TRL's cap on them, or text that held no call), the episode is
played to its end with the trained role's remaining turns as the fallback
(``noop``). So stopping, or only making illegal calls, scores exactly what a
legal ``noop`` every turn scores, never better.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from chaosops._extras import require
from chaosops._urls import http_url_with_host, shown_url
from chaosops.agents.adapters import TurnTimeoutArg
from chaosops.agents.conversation import MoveTools
from chaosops.agents.llm.answers import describe, describe_change
from chaosops.agents.policies import SCRIPTED, Others
from chaosops.agents.seated import SeatedEpisode
from chaosops.env.failures import DEFAULT_FAILURE
from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction, ChaosOpsObservation
from chaosops.env.results import EpisodeResult
from chaosops.env.rules import IllegalMove
from chaosops.env.world_sim import Scenario
from chaosops.scenarios import choose_scenario

__all__ = ["REWARDS", "ChaosOpsToolEnv", "Outcome", "fallback_return", "repaid"]

REWARDS = ("team", "credit")
"""What ``get_reward`` returns: the team's return, or the trained role's credit."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """A finished rollout, scored.

    ``team_return`` is the episode's return (every step's reward and an
    unresolved end's penalty), the world's early root-cause bonus counted once
    however often a right cause is declared again. ``credit`` is that return minus the return of
    the same seeded episode with the trained role playing the fallback every
    turn: what the role's own moves earned. ``legal_share`` is the share of
    the role's turns played by a legal move of its own, a refused call
    counting as a turn lost. ``fallback_turns`` are the turns the fallback
    played once the rollout stopped."""

    team_return: float
    credit: float
    legal_share: float
    resolved: bool
    fallback_turns: int


class _Local:
    """The episode in this process, on the runtime's engine: ``others`` play
    the roles not trained, each turn under ``turn_timeout``."""

    def __init__(self, others: Others, turn_timeout: TurnTimeoutArg = None) -> None:
        self.play = SeatedEpisode(others, turn_timeout=turn_timeout)
        self._mark = 0.0  # the episode's reward when the trained role last saw it

    def start(self, scenario: Scenario, role: AgentRole) -> tuple[ChaosOpsObservation, float]:
        now = self.play.start(scenario, seats=frozenset({role}))
        self._mark = now.reward
        return now.observation, now.reward

    def move(self, action: ChaosOpsAction) -> tuple[ChaosOpsObservation, float]:
        now = self.play.play(action)
        reward, self._mark = now.reward - self._mark, now.reward
        obs = now.observation
        if now.done:  # the last view is the next role's: show the trained role its own
            obs = obs.model_copy(update={"view": self.play.env.world.project_view(action.role)})
        return obs, reward

    def finish(self) -> int:
        return self.play.finish()

    def reward(self) -> float:
        return float(self.play.env.state.cumulative_reward)

    def result(self) -> EpisodeResult | None:
        return self.play.result()

    @property
    def resolved(self) -> bool:
        return self.play.resolved

    @property
    def done(self) -> bool:
        return self.play.done

    def close(self) -> None:
        self.play.close()


def _world(kind: str, how: Any, turn_timeout: Any = None) -> Any:
    """A new episode in this process (``how``: the others) or on a server (its URL)."""
    if kind == "local":
        return _Local(dict(how) if isinstance(how, tuple) else how, turn_timeout)
    require("openenv", "serve", "ChaosOpsToolEnv(base_url=...)")
    from chaosops.train.remote import ServedEpisode  # the serve extra's

    return ServedEpisode(how)


def _fallback_return(
    kind: str, how: Any, scenario: Scenario, role: AgentRole, turn_timeout: Any = None
) -> float:
    """The return of ``scenario`` with ``role`` playing the fallback every turn."""
    world = _world(kind, how, turn_timeout)
    try:
        world.start(scenario, role)
        world.finish()
        return world.reward() - _repaid(world)
    finally:
        world.close()


def _repaid(world: Any) -> float:
    """What the world paid again for a right cause declared once more; a served
    episode's steps are the server's, and are taken as they are."""
    result = world.result() if hasattr(world, "result") else None
    return 0.0 if result is None else repaid(result)


_PAID_ONCE = ("early_root_cause_bonus", "rogue_caught_bonus")
"""The reward parts the world pays again with every repetition of their move."""


def repaid(result: EpisodeResult) -> float:
    """What the world paid again for a move that pays with every repetition (a
    right root cause declared once more, the rogue agent flagged once more):
    a trainer's return counts each of them once."""
    total = 0.0
    for part in _PAID_ONCE:
        paid = [getattr(s.breakdown, part) for s in result.steps if s.breakdown]
        total += sum(bonus for bonus in paid if bonus) - next((b for b in paid if b), 0.0)
    return total


# Scripted others and a server's policies are seeded per scenario: the
# counterfactual replays exactly, so it is played once per row and role.
_cached_fallback_return = lru_cache(maxsize=8192)(_fallback_return)


def fallback_return(others: Others, scenario: Scenario, role: AgentRole) -> float | None:
    """The return of ``scenario`` with ``role`` playing the fallback every turn and
    ``others`` (scripted, by name) the rest, a rollout's counterfactual (played
    once per row and role); None when the others are policy objects."""
    named = _others_key(others)
    return None if named is None else _cached_fallback_return("local", named, scenario, role)


_ROLES = tuple(role.value for role in AgentRole)
_OTHERS = (
    f"a scripted policy's name ({', '.join(SCRIPTED)}), a policy (observation, role) -> "
    "action, or a map from role to either"
)


def _check_others(others: Any) -> None:
    """``others`` as :class:`ChaosOpsToolEnv` takes it, or one ValueError."""
    given = others.items() if isinstance(others, Mapping) else [(None, others)]
    for role, policy in given:
        if role is not None and role not in _ROLES:
            raise ValueError(f"others: no role {role!r:.40}; the roles are {', '.join(_ROLES)}")
        if (policy not in SCRIPTED) if isinstance(policy, str) else not callable(policy):
            raise ValueError(f"others: {policy!r:.40} is no policy; {_OTHERS}")


def _others_key(others: Others) -> Any:
    """A hashable stand-in for ``others`` made of names only, or None."""
    if isinstance(others, str):
        return others
    if isinstance(others, Mapping) and all(isinstance(v, str) for v in others.values()):
        return tuple(sorted((str(k), v) for k, v in others.items()))
    return None


@dataclass(slots=True)
class _Tally:
    """The trained role's calls in one rollout: applied, and refused."""

    legal: int = 0
    refused: int = 0

    def share(self, fallback: int) -> float:
        turns = self.legal + self.refused + fallback
        return self.legal / turns if turns else 0.0


class ChaosOpsToolEnv(MoveTools):
    """One ChaosOps episode a model plays through tools, as one role.

    ``others`` plays the other roles: a scripted policy's name (``random``,
    ``heuristic``, ``oracle``), a policy ``(observation, role) -> action``
    (async ones too), or a map from role to either. Default: heuristic.
    With ``base_url``, the episode is played on a ``chaosops serve`` server
    instead, whose own policies play the other roles (the serve extra).
    The episode is played by the runtime's engine, as ``chaosops run`` plays
    one: ``turn_timeout`` is the others' deadline per turn (seconds, or a map
    by role), a late or failing turn playing the fallback (``noop``).
    ``reward`` chooses what :meth:`get_reward` returns: ``"team"``, the
    episode's return, or ``"credit"``, the trained role's own (:class:`Outcome`).
    """

    def __init__(
        self,
        others: Others = "heuristic",
        base_url: str | None = None,
        reward: Literal["team", "credit"] = "team",
        turn_timeout: TurnTimeoutArg = None,
    ) -> None:
        if reward not in REWARDS:
            raise ValueError(f"reward={reward!r}: the rewards are {' and '.join(REWARDS)}")
        if base_url is not None and not http_url_with_host(base_url):
            raise ValueError(
                f"base_url={shown_url(base_url)!r}: a chaosops serve URL, http(s)://HOST:PORT"
            )
        if base_url is not None and (others != "heuristic" or turn_timeout is not None):
            raise ValueError(
                "others= and turn_timeout= beside base_url=: a served episode's other roles "
                "and deadlines are the server's (chaosops serve --policy, --turn-timeout)"
            )
        _check_others(others)
        # how to make an episode like this one; its counterfactual is cached
        # unless the others are policy objects, which may hold state
        named = _others_key(others)
        self._how: tuple[str, Any]
        if base_url is not None:
            self._how, self._cached = ("served", base_url), True
        else:
            self._how, self._cached = ("local", others if named is None else named), bool(named)
        self._turn_timeout = turn_timeout
        self._world: Any = _world(*self._how, turn_timeout)
        self._reward = reward
        self._role = AgentRole.SRE
        self._scenario: Scenario | None = None
        self._seen: Any = None  # the role's view at its last move
        self._tally = _Tally()
        self._outcome: Outcome | None = None  # the rollout scored, once it is over
        # TRL offers every public function of the class as a tool: close() is
        # the instance's own, so that a model is never offered it.
        self.close = self._close

    def reset(
        self,
        failure_type: str = DEFAULT_FAILURE.value,
        difficulty: str = "easy",
        seed: int = 0,
        max_steps: int | None = None,
        role: str = "sre",
        **columns: Any,
    ) -> str:
        """Start the episode a dataset row names; the first observation as text.

        Columns other than these (``prompt``, say) are the trainer's and ignored.
        """
        if role not in _ROLES:
            raise ValueError(f"role={role!r:.40}: one of {', '.join(_ROLES)}")
        self._role = AgentRole(role)
        self._scenario = choose_scenario(
            failure_type=failure_type, difficulty=difficulty, seed=seed, max_steps=max_steps
        )
        self._tally, self._outcome = _Tally(), None
        obs, _ = self._world.start(self._scenario, self._role)
        self._seen = obs.view
        return describe(obs, self._role)

    def _move(self, kind: ActionType, target: str | None = None, **args: Any) -> str:
        action = ChaosOpsAction(role=self._role, action_type=kind, target=target, args=args)
        if self._outcome is not None:
            raise IllegalMove("the episode is over: reset() to start another")
        try:
            obs, _ = self._world.move(action)
        except IllegalMove:
            self._tally.refused += 1
            raise
        self._tally.legal += 1
        text = describe_change(self._seen, obs, self._role)
        self._seen = obs.view
        return text

    def get_reward(self) -> float:
        """The finished episode's team return, or the trained role's credit
        (the ``reward`` chosen); a rollout that stopped early is played out first."""
        outcome = self.outcome
        return outcome.team_return if self._reward == "team" else outcome.credit

    @property
    def outcome(self) -> Outcome:
        """The rollout, scored (:class:`Outcome`): reading it ends the rollout,
        its remaining turns played by the fallback. Scored once: TRL reads it
        for each reward function."""
        if self._scenario is None:
            raise IllegalMove("no episode yet: reset() first")
        if self._outcome is None:
            self._outcome = self._score(self._scenario)
        return self._outcome

    def _score(self, scenario: Scenario) -> Outcome:
        fallback = self._world.finish()
        team = self._world.reward() - _repaid(self._world)
        if self._cached:  # scripted others answer at once: no deadline changes them
            baseline = _cached_fallback_return(*self._how, scenario, self._role)
        else:
            baseline = _fallback_return(*self._how, scenario, self._role, self._turn_timeout)
        return Outcome(
            team_return=team, credit=team - baseline, legal_share=self._tally.share(fallback),
            resolved=self._world.resolved, fallback_turns=fallback,
        )  # fmt: skip

    @property
    def result(self) -> EpisodeResult | None:
        """The finished episode as ``chaosops run`` records it (every turn, who
        timed out or failed, the final state); None for a served episode, which
        the server records. Reading it ends the rollout, as :attr:`outcome` does."""
        self.outcome  # noqa: B018 - scores, and so finishes, the rollout
        return self._world.result() if hasattr(self._world, "result") else None

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
