"""``run_episode``: check what the caller gave, then play an :class:`~actors._episode.Episode`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ._annotations import LOGGED_ANNOTATIONS
from ._deadline import timeouts_by_role
from ._episode import Episode, EpisodeHooks
from ._ids import new_episode_id
from ._types import EpisodeTrace, Policy, TurnEnv, TurnRecord, TurnTimeout

__all__ = ["LOGGED_ANNOTATIONS", "run_episode"]


def _is_not_none(value: object) -> bool:
    return value is not None


async def run_episode(
    env: TurnEnv,
    *,
    policies: Mapping[Any, Policy],
    fallback: Callable[[Any], Any],
    max_turns: int,
    is_action: Callable[[object], bool] = _is_not_none,
    reset_kwargs: Mapping[str, Any] | None = None,
    turn_timeout: TurnTimeout = None,
    episode_id: str | None = None,
    log_fields: Mapping[str, Any] | None = None,
    describe_turn: Callable[[TurnRecord], Mapping[str, Any]] | None = None,
    describe_finish: Callable[[TurnEnv, EpisodeTrace], Mapping[str, Any]] | None = None,
    after_step: Callable[[TurnEnv, TurnRecord], None] | None = None,
    record_turns: bool = True,
) -> EpisodeTrace:
    """Play one episode of ``env`` with one actor task per role in ``policies``.

    The coordinator resets the environment with ``reset_kwargs``, then for each
    turn sends the observation to the actor of ``observation.turn_role``, waits
    for its reply until that role's deadline (``turn_timeout``), applies exactly
    one action with ``env.step`` and records it, until the observation is done
    or ``max_turns`` steps were applied. Roles without a policy play
    ``fallback(role)``; so does a turn whose policy timed out (``timed_out``),
    raised, or returned something ``is_action`` rejects (``error`` says what).

    ``after_step(env, record)`` runs after every step (read what the
    environment computed for it). ``record_turns=False`` leaves ``trace.turns``
    empty, for a caller that keeps its own records from ``after_step``.

    Logging (when configured): ``episode_started`` with ``log_fields``, one
    ``turn`` event per step with the fields returned by
    ``describe_turn(record)`` (a new dict each call: the event's own fields
    are added to it and win over its keys) and the small annotations of
    :data:`LOGGED_ANNOTATIONS` (the record's ``info`` keeps them all),
    ``episode_finished`` with ``describe_finish(env, trace)``.

    A turn closed at its deadline keeps in ``info`` what the policy annotated
    before the deadline (an LLM policy records its prompt before its request).

    An exception from ``env.reset`` or ``env.step`` ends the episode with
    status ``"failed"``; it is not raised. One from a callback of the
    caller's (``fallback``, ``is_action``, ``after_step``, ``describe_turn``)
    is raised as itself, and ``episode_finished`` is logged with status
    ``"error"`` (``"cancelled"`` when the caller is cancelled). Arguments that
    would only fail mid-episode (a policy or fallback that is not callable,
    ``max_turns`` below 1, a ``turn_timeout`` that is not seconds or names no
    role of the episode) raise a ValueError or TypeError before it starts.
    All actor tasks are gone when this returns, also when the caller is
    cancelled.
    """
    _check_arguments(env, policies, fallback, max_turns, turn_timeout)
    hooks = EpisodeHooks(
        fallback=fallback,
        is_action=is_action,
        reset_kwargs=reset_kwargs or {},
        log_fields=log_fields,
        describe_turn=describe_turn,
        describe_finish=describe_finish,
        after_step=after_step,
        record_turns=record_turns,
    )
    timeouts = timeouts_by_role(turn_timeout, policies)
    episode = Episode(env, policies, timeouts, max_turns, hooks, episode_id or new_episode_id())
    return await episode.play()


def _check_arguments(
    env: TurnEnv,
    policies: Mapping[Any, Policy],
    fallback: Callable[[Any], Any],
    max_turns: int,
    turn_timeout: TurnTimeout,
) -> None:
    """Refuse, before anything starts, what would only fail in the middle of an
    episode (or never, silently): one plain error saying what is accepted."""
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
        raise ValueError(f"max_turns must be an integer >= 1, got {max_turns!r}")
    if not isinstance(policies, Mapping):
        raise TypeError(f"policies must be a mapping role -> policy, got {policies!r:.80}")
    for role, policy in policies.items():
        if not callable(policy):
            raise TypeError(
                f"the policy for role {role!r} is {policy!r:.80}, not a callable "
                "policy(observation, role), sync or async"
            )
    if not callable(fallback):
        raise TypeError(f"fallback must be a callable role -> action, got {fallback!r:.80}")
    if isinstance(turn_timeout, Mapping):
        roles = set(policies)
        roles.update(getattr(env, "turn_order", ()) or ())
        unknown = [role for role in turn_timeout if role not in roles]
        if unknown:
            raise ValueError(
                f"turn_timeout names {unknown[0]!r}, which is not a role of the episode; "
                f"roles: {', '.join(map(repr, sorted(roles, key=str)))}"
            )
