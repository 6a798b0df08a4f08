"""The shapes the runtime works with: policies, environments, records."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

Role: TypeAlias = Hashable
"""A role name (the value of ``observation.turn_role``); any hashable."""

Policy: TypeAlias = Callable[[Any, Any], Any | Awaitable[Any]]
"""``policy(observation, role) -> action``, sync or async.

Sync policies run inline in their actor (keep them fast); wrap a blocking one in
:func:`actors.in_thread` so its deadline can be enforced.
"""

TurnTimeout: TypeAlias = float | Mapping[Any, float] | None
"""Seconds for every role, a mapping role -> seconds (roles not in it have no
deadline), or None for no deadline."""

Status: TypeAlias = Literal["ok", "failed", "error", "cancelled"]
"""How an episode ended.

- ``"ok"``: played to its end (done, or the turn limit); policy errors and
  timeouts cost turns, not the episode.
- ``"failed"``: the environment raised, or returned no observation; the
  trace's ``error`` says what. :func:`actors.run_episode` returns it.
- ``"error"``: a callback of the caller's raised; logged, and raised.
- ``"cancelled"``: the caller cancelled the episode; logged, and the
  cancellation propagates.
"""


def error_text(exc: BaseException) -> str:
    """``"<ExceptionType>: <message>"``: how a step's or an episode's error is written."""
    return f"{type(exc).__name__}: {exc}"


class TurnObservation(Protocol):
    """What the coordinator reads from an observation."""

    @property
    def turn_role(self) -> Any: ...
    @property
    def done(self) -> bool: ...
    @property
    def reward(self) -> float | None: ...


class TurnEnv(Protocol):
    """A turn-based environment the coordinator can drive (synchronous)."""

    @property
    def turn_order(self) -> Sequence[Any]: ...
    def reset(self, **kwargs: Any) -> Any: ...
    def step(self, action: Any) -> Any: ...


@dataclass(slots=True, eq=False)
class TurnRecord:
    """One applied step of an episode.

    ``observation`` is what the role saw, ``action`` what was applied (the
    fallback on a timeout or error), ``latency_s`` runs from sending the
    observation to the policy's answer (to the turn's close, on a timeout), on
    the clock deadlines are judged on: an applied answer's is below its
    deadline. ``info`` holds what the policy recorded
    with :meth:`TurnContext.annotate`.
    """

    turn: int
    role: Any
    observation: Any
    action: Any
    next_observation: Any
    timed_out: bool = False
    error: str | None = None
    latency_s: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class EpisodeTrace:
    """What :func:`actors.run_episode` returns.

    ``status`` is ``"failed"`` when the environment raised (``error`` says
    what); policy errors and timeouts never fail an episode, they are counted
    in ``errors`` and ``timeouts``.
    """

    episode_id: str
    status: Status = "ok"
    error: str | None = None
    turns: list[TurnRecord] = field(default_factory=list)
    final_observation: Any = None
    timeouts: int = 0
    errors: int = 0
    wall_s: float = 0.0
