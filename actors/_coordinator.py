"""The coordinator: one per episode, owns the environment and the turn order."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from time import perf_counter
from typing import Any

import anyio
from structlog.contextvars import bound_contextvars

from . import _logging
from ._actor import Actor, EpisodeState, Reply, Request, log_late_reply
from ._deadline import timeouts_by_role
from ._mailbox import Mailbox, asyncio_loop
from ._types import EpisodeTrace, Policy, TurnEnv, TurnRecord, TurnTimeout


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
    environment computed for it). Logging (when configured): ``episode_started``
    with ``log_fields``, one ``turn`` event per step with the fields returned by
    ``describe_turn(record)`` and the policy's annotations, ``episode_finished``
    with ``describe_finish(env, trace)``.

    An exception from ``env.reset`` or ``env.step`` ends the episode with
    status ``"failed"``; it is not raised. All actor tasks are gone when this
    returns, also when the caller is cancelled.
    """
    episode_id = episode_id or uuid.uuid4().hex
    with bound_contextvars(episode_id=episode_id):
        trace = EpisodeTrace(episode_id=episode_id)
        started = perf_counter()
        if _logging.log_enabled(_logging.INFO):
            _logging.STATE.logger.info(
                "episode_started", episode_id=episode_id, **(log_fields or {})
            )
        try:
            observation = env.reset(**(reset_kwargs or {}))
        except Exception as exc:
            trace.status, trace.error = "failed", f"{type(exc).__name__}: {exc}"
        else:
            timeouts = timeouts_by_role(turn_timeout, policies)
            await _play(
                env, trace, observation, policies, timeouts, fallback, is_action,
                max_turns, describe_turn, after_step,
            )  # fmt: skip
        trace.wall_s = perf_counter() - started
        if _logging.log_enabled(_logging.INFO):
            _logging.STATE.logger.info(
                "episode_finished",
                episode_id=episode_id,
                status=trace.status,
                error=trace.error,
                **(describe_finish(env, trace) if describe_finish is not None else {}),
                timeouts=trace.timeouts,
                errors=trace.errors,
                wall_s=round(trace.wall_s, 6),
            )
        return trace


async def _play(
    env: TurnEnv,
    trace: EpisodeTrace,
    observation: Any,
    policies: Mapping[Any, Policy],
    timeouts: Mapping[Any, float | None],
    fallback: Callable[[Any], Any],
    is_action: Callable[[object], bool],
    max_turns: int,
    describe_turn: Callable[[TurnRecord], Mapping[str, Any]] | None,
    after_step: Callable[[TurnEnv, TurnRecord], None] | None,
) -> None:
    loop = asyncio_loop()
    state = EpisodeState(trace.episode_id)
    # Late replies: at most one in flight per actor plus one queued request each.
    replies: Mailbox[Reply] = Mailbox(2 * len(policies) + 2, loop)
    actors = {
        role: Actor(role, policy, state, Mailbox(1, loop)) for role, policy in policies.items()
    }
    records = trace.turns
    log = _logging.STATE
    now = loop.time if loop is not None else anyio.current_time
    try:
        async with anyio.create_task_group() as tg:
            for actor in actors.values():
                tg.start_soon(actor.run, replies)
            turn = 0
            while not observation.done and turn < max_turns:
                role = observation.turn_role
                actor = actors.get(role)
                timed_out = False
                error: str | None = None
                info: dict[str, Any] | None = None
                if actor is None:
                    action = fallback(role)
                    latency = 0.0
                else:
                    timeout = timeouts[role]
                    sent = perf_counter()
                    state.open_turn = turn
                    reply: Reply | None = None
                    if timeout is None:
                        # Without deadlines every turn is answered, so the inbox is empty.
                        if not actor.inbox.try_put((turn, observation, None)):
                            await actor.inbox.put((turn, observation, None))
                        reply = await replies.get()
                        if reply[0] != turn:
                            reply = await _reply_for(turn, replies, trace.episode_id, reply)
                    else:
                        deadline = now() + timeout
                        reply = await _reply_before(
                            deadline, turn, actor, observation, replies, trace.episode_id
                        )
                    state.open_turn = -1
                    latency = perf_counter() - sent
                    if reply is None:
                        timed_out = True
                        trace.timeouts += 1
                        action = fallback(role)
                    else:
                        _, _, action, exc, info = reply
                        if exc is not None:
                            error = f"{type(exc).__name__}: {exc}"
                        elif not is_action(action):
                            error = f"TypeError: policy returned {action!r:.200}, not an action"
                            if _logging.log_enabled(_logging.ERROR):
                                log.logger.error(
                                    "policy_error",
                                    episode_id=trace.episode_id,
                                    turn=turn,
                                    role=role,
                                    exception=error,
                                )
                        if error is not None:
                            trace.errors += 1
                            action = fallback(role)
                try:
                    next_observation = env.step(action)
                except Exception as exc:
                    trace.status, trace.error = "failed", f"{type(exc).__name__}: {exc}"
                    break
                record = TurnRecord(
                    turn, role, observation, action, next_observation,
                    timed_out, error, latency, info if info is not None else {},
                )  # fmt: skip
                records.append(record)
                if after_step is not None:
                    after_step(env, record)
                if log.threshold <= _logging.INFO:
                    _log_turn(record, trace.episode_id, describe_turn)
                observation = next_observation
                turn += 1
            trace.final_observation = observation
            # Idle actors leave when their inbox closes. Cancel only when one is
            # still inside a policy call (a closed turn): anyio's cancel() from
            # a task formats that task's repr, too dear for every episode.
            _close(replies, actors)
            if any(actor.busy for actor in actors.values()):
                tg.cancel_scope.cancel()
    finally:
        _close(replies, actors)


def _close(replies: Mailbox[Reply], actors: Mapping[Any, Actor]) -> None:
    replies.close()
    for actor in actors.values():
        actor.inbox.close()


async def _reply_before(
    deadline: float,
    turn: int,
    actor: Actor,
    observation: Any,
    replies: Mailbox[Reply],
    episode_id: str,
) -> Reply | None:
    """The reply for ``turn`` if it comes before ``deadline``, else None."""
    request: Request = (turn, observation, deadline)
    if not actor.inbox.try_put(request):
        # The actor is still busy with a closed turn: wait for room until the deadline.
        with anyio.move_on_after(max(0.0, deadline - anyio.current_time())) as scope:
            await actor.inbox.put(request)
        if scope.cancelled_caught:
            return None
    while True:
        try:
            reply = await replies.get_before(deadline)
        except TimeoutError:
            return None
        if reply[0] == turn:
            return reply
        log_late_reply(episode_id, reply[0], reply[1])


async def _reply_for(turn: int, replies: Mailbox[Reply], episode_id: str, reply: Reply) -> Reply:
    """The reply for ``turn``, dropping ``reply`` and any other for a closed turn."""
    while reply[0] != turn:
        log_late_reply(episode_id, reply[0], reply[1])
        reply = await replies.get()
    return reply


def _log_turn(
    record: TurnRecord,
    episode_id: str,
    describe_turn: Callable[[TurnRecord], Mapping[str, Any]] | None,
) -> None:
    next_observation = record.next_observation
    fields: dict[str, Any] = {
        "episode_id": episode_id,
        "turn": record.turn,
        "role": record.role,
    }
    if describe_turn is not None:
        fields.update(describe_turn(record))
    fields["reward"] = getattr(next_observation, "reward", None)
    fields["done"] = getattr(next_observation, "done", None)
    fields["timed_out"] = record.timed_out
    fields["error"] = record.error
    fields["latency_ms"] = round(record.latency_s * 1000.0, 3)
    if record.info:
        for key, value in record.info.items():
            fields.setdefault(key, value)
    _logging.STATE.logger.info("turn", **fields)
