"""The coordinator: one per episode, owns the environment and the turn order."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from math import floor
from time import perf_counter
from typing import Any

import anyio
from structlog.contextvars import bind_contextvars, reset_contextvars, unbind_contextvars

from . import _logging, _metrics, _tracing
from ._actor import Actor, EpisodeState, Reply, log_late_reply
from ._deadline import timeouts_by_role
from ._gate import CURRENT_GATE, INSTANT_S, SLICE_S, TurnGate, one_pass
from ._ids import new_episode_id
from ._mailbox import Mailbox, Replies, asyncio_loop
from ._metrics import EpisodeMeter
from ._tasks import TaskGroup
from ._types import EpisodeTrace, Policy, TurnEnv, TurnRecord, TurnTimeout, error_text


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
    timeouts = timeouts_by_role(turn_timeout, policies)  # checked before anything starts
    episode_id = episode_id or new_episode_id()
    # What ``bound_contextvars`` does, minus its walk over every context
    # variable to save the previous value: the token restores it.
    tokens = bind_contextvars(episode_id=episode_id)
    tracer = _tracing.STATE.tracer  # None: tracing off
    span: Any = None
    described: Mapping[str, Any] | None = None
    try:
        trace = EpisodeTrace(episode_id=episode_id)
        started = perf_counter()
        if tracer is not None:
            span, span_token = _tracing.start_episode(tracer, episode_id, log_fields)
        meter = _metrics.STATE.meter
        counted = meter.episode(log_fields) if meter is not None else None
        if _logging.log_enabled(_logging.INFO):
            _logging.emit(
                "info", "episode_started", {"episode_id": episode_id, **(log_fields or {})}
            )
        try:
            observation = env.reset(**(reset_kwargs or {}))
        except Exception as exc:
            trace.status, trace.error = "failed", error_text(exc)
        else:
            try:
                await _play(
                    env, trace, observation, policies, timeouts, fallback, is_action,
                    max_turns, describe_turn, after_step, record_turns, counted,
                )  # fmt: skip
            except BaseException as exc:
                # Abandoned: cancelled, or a callback of the caller's raised.
                # The log still says the episode ended, and how.
                if isinstance(exc, anyio.get_cancelled_exc_class()):
                    trace.status, trace.error = "cancelled", None
                else:
                    trace.status, trace.error = "error", error_text(exc)
                if counted is not None:
                    counted.finished(trace.status)
                if _logging.log_enabled(_logging.INFO):
                    trace.wall_s = perf_counter() - started
                    _log_finished(trace, None)  # abandoned mid-way: describe_finish is not asked
                raise
        trace.wall_s = perf_counter() - started
        if counted is not None:
            counted.finished(trace.status)
        logged = _logging.log_enabled(_logging.INFO)
        if describe_finish is not None and (logged or span is not None):
            described = describe_finish(env, trace)
        if logged:
            _log_finished(trace, described)
        return trace
    finally:
        if span is not None:
            _tracing.end_episode(span, span_token, trace, described)
        try:
            reset_contextvars(**tokens)
        except ValueError:  # closed from another context (a coroutine collected unfinished)
            unbind_contextvars("episode_id")


def _log_finished(trace: EpisodeTrace, described: Mapping[str, Any] | None) -> None:
    # episode_finished, with what describe_finish returned when it was called
    _logging.emit(
        "info",
        "episode_finished",
        {
            "episode_id": trace.episode_id,
            "status": trace.status,
            "error": trace.error,
            **(described or {}),
            "timeouts": trace.timeouts,
            "errors": trace.errors,
            "wall_s": floor(trace.wall_s * 1e6 + 0.5) / 1e6,  # round(, 6): 10x dearer
        },
    )


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


async def _stop_calls(actors: Mapping[Any, Actor], tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel the policy calls still in flight through their cancel scopes; wait for them.

    On the way out of an error or a cancellation the task group would cancel
    its tasks natively, which breaks a policy's shielded section; anyio's
    delivery honours it. Idle actors need nothing: their inbox is closed.
    """
    for actor in actors.values():
        if actor.scope is not None:
            actor.scope.cancel()
    with anyio.CancelScope(shield=True):
        await asyncio.wait(tasks)


def _close(replies: Mailbox[Reply] | Replies[Reply], actors: Mapping[Any, Actor]) -> None:
    replies.close()
    for actor in actors.values():
        actor.inbox.close()


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
    record_turns: bool,
    meter: EpisodeMeter | None,
) -> None:
    """The actors' task group and the turn loop: send, wait for the reply or
    the deadline, step, record, log.

    One coroutine, with the loop inline: every coroutine between the task and
    the future it waits on is walked again each time the coordinator resumes
    (twice a turn), and with many episodes in flight each level is a few cold
    cache lines.
    """
    loop = asyncio_loop()
    episode_id = trace.episode_id
    # At most one reply is ever queued: an actor replies only while its turn is
    # open. On asyncio a queue and a future (no stream to build, close and go through).
    replies: Mailbox[Reply] | Replies[Reply] = (
        Mailbox(len(policies) + 1, loop) if loop is None else Replies(loop)
    )
    state = EpisodeState(episode_id, replies, loop)
    state.meter = meter  # None: metrics off
    actors = {
        role: Actor(role, policy, state, Mailbox(1, loop)) for role, policy in policies.items()
    }
    records = trace.turns if record_turns else None
    log = _logging.STATE
    tracer = _tracing.STATE.tracer  # None: tracing off
    turn_span: Any = None  # the open turn's span, while tracing
    now = state.clock  # monotonic on asyncio (see actors._actor.turn_clock)
    turn = 0
    try:
        # Read once a turn (an observation's attribute may be dear), and its
        # truth taken here: a value whose truth raises fails the episode.
        done = True if observation.done else False
    except Exception as exc:  # not an observation (None, say): the environment failed
        trace.status, trace.error = "failed", _unreadable(exc, "reset")
        done = True
    raised: Exception | None = None
    known_roles: Any = _UNKNOWN  # the turn order's and the policies' roles (see _roles_of)
    # The batch's gate (asyncio): instant turns are played holding one of its
    # permits (see actors._gate); ``held_since`` is when this episode took it.
    gate: TurnGate | None = CURRENT_GATE.get() if loop is not None else None
    holding = False
    held_since = 0.0
    async with TaskGroup() as tg:
        # Each actor's task starts at its role's first turn: an episode's first
        # request goes out after one task start, not one per role (a batch's
        # episodes start one after another), and a role that never plays has none.
        try:
            while not done and turn < max_turns:
                try:  # (a try costs nothing on Python 3.11+ until it catches)
                    role = observation.turn_role
                    actor = actors.get(role)
                except Exception as exc:  # no turn_role, or an unhashable one
                    trace.status = "failed"
                    trace.error = _unreadable(exc, "step" if turn else "reset")
                    break
                timed_out = False
                error: str | None = None
                info: dict[str, Any] | None = None
                if tracer is not None:
                    turn_span = _start_turn_span(tracer, state, turn, role, actor is not None)
                if actor is None:
                    if known_roles is _UNKNOWN:  # once, at the episode's first unplayed turn
                        known_roles = _roles_of(env, policies)
                    if known_roles is not None and role not in known_roles:
                        # Neither the environment's turn order nor the policies
                        # name it: the environment failed, not the fallback.
                        trace.status = "failed"
                        trace.error = _unreadable(
                            ValueError(f"turn_role {role!r:.80} is not a role of the "
                                       "environment's turn_order"),
                            "step" if turn else "reset",
                        )  # fmt: skip
                        break
                    action = fallback(role)
                    latency = 0.0
                else:
                    timeout = timeouts[role]
                    if gate is not None:
                        if not actor.instant:
                            if holding:  # a slow reply ahead: hold nothing while it comes
                                gate.release()
                                holding = False
                        elif not holding:
                            # Back from a wait mid-episode: the first line; a start: the second.
                            await gate.acquire(returning=turn > 0)
                            holding, held_since = True, perf_counter()
                        elif gate.returning and perf_counter() - held_since >= SLICE_S:
                            # The slice is over and an episode back from a wait
                            # is in line: let it in, and queue again.
                            gate.release()
                            holding = False
                            await gate.acquire()
                            holding, held_since = True, perf_counter()
                    if not actor.started:
                        actor.started = True
                        tg.start_soon(actor.run, replies)
                    sent = perf_counter()
                    state.open_turn = turn
                    reply: Reply | None
                    if loop is not None:
                        # asyncio: wait on the reply channel's future directly (no
                        # coroutine in between). With a deadline, the episode's timer
                        # (EpisodeState.arm) closes the turn, cancels the call in
                        # flight and wakes us; ``expired`` then says so.
                        if timeout is None:
                            state.open_deadline = None
                            # A request still queued is for a closed turn: replace it.
                            actor.inbox.put_latest((turn, observation, None))
                        else:
                            deadline = now() + timeout
                            actor.inbox.put_latest((turn, observation, deadline))
                            state.arm(actor, deadline)
                        replies.expired = False
                        # Holding a permit: one pass of the loop first (an
                        # instant policy has replied by then).
                        one_more = holding
                        while True:
                            reply = replies.take()
                            if reply is None:
                                if replies.expired:
                                    break
                                if one_more:
                                    one_more = False
                                    await one_pass()
                                    continue
                                if holding:  # not instant after all: let another play
                                    gate.release()  # type: ignore[union-attr]
                                    holding = False
                                    actor.instant = False
                                await replies.waiter()
                            elif reply[0] != turn:
                                log_late_reply(episode_id, reply[0], reply[1], meter=meter)
                            else:
                                break
                    elif timeout is None:
                        actor.inbox.put_latest((turn, observation, None))
                        reply = await replies.get()
                        while reply[0] != turn:
                            log_late_reply(episode_id, reply[0], reply[1], meter=meter)
                            reply = await replies.get()
                    else:
                        deadline = now() + timeout
                        actor.inbox.put_latest((turn, observation, deadline))
                        reply = await replies.get_before(deadline)
                        while reply is not None and reply[0] != turn:
                            log_late_reply(episode_id, reply[0], reply[1], meter=meter)
                            reply = await replies.get_before(deadline)
                        if reply is None:
                            state.close_turn(actor, turn)
                    state.open_turn = -1
                    latency = perf_counter() - sent
                    if gate is not None and (reply is None or not holding):
                        # Played without a permit (or closed at its deadline):
                        # instant next time if the reply came within INSTANT_S.
                        # Holding one, the reply came within the one pass.
                        actor.instant = reply is not None and latency < INSTANT_S
                    if reply is None:
                        timed_out = True
                        info, state.closed_info = state.closed_info, None
                        action = fallback(role)
                    else:
                        _, _, action, exc, info = reply
                        if exc is not None:
                            error = error_text(exc)
                        elif not is_action(action):
                            error = f"TypeError: policy returned {action!r:.200}, not an action"
                            if _logging.log_enabled(_logging.ERROR):
                                log.logger.error(
                                    "policy_error",
                                    episode_id=episode_id,
                                    turn=turn,
                                    role=role,
                                    exception=error,
                                )
                        if error is not None:
                            action = fallback(role)
                try:
                    next_observation = env.step(action)
                except Exception as exc:
                    trace.status, trace.error = "failed", error_text(exc)
                    break
                try:
                    done = True if next_observation.done else False
                    reward = next_observation.reward
                except Exception as exc:  # env.step returned no observation
                    trace.status, trace.error = "failed", _unreadable(exc, "step")
                    break
                # Counted once applied: a turn whose step failed is no step.
                if timed_out:
                    trace.timeouts += 1
                elif error is not None:
                    trace.errors += 1
                record = TurnRecord(
                    turn, role, observation, action, next_observation,
                    timed_out, error, latency, info if info is not None else {},
                )  # fmt: skip
                if records is not None:
                    records.append(record)
                if after_step is not None:
                    after_step(env, record)
                logged = log.threshold <= _logging.INFO
                if logged or turn_span is not None:
                    # describe_turn once for the span and the log line (which takes it over)
                    described = describe_turn(record) if describe_turn is not None else None
                    if turn_span is not None:
                        state.trace_context = None
                        _tracing.end_turn(turn_span, record, described, done)
                        turn_span = None
                    if logged:
                        # described's dict handed over as it is unless
                        # annotations or another mapping need _turn_extra.
                        extra = described
                        if info or type(extra) is not dict:
                            extra = _turn_extra(extra, info)
                        log.emit_turn(
                            extra, episode_id, turn, role, reward, done,
                            timed_out, error,
                            # Milliseconds to 3 decimals; floor() and a division
                            # cost a fifth of round().
                            floor(latency * 1e6 + 0.5) / 1000,
                        )  # fmt: skip
                if meter is not None:
                    played = actor is not None
                    meter.turn(
                        role, _outcome(record, played), latency if played else None, record.info
                    )
                observation = next_observation
                turn += 1
            trace.final_observation = observation
        except Exception as exc:
            # A callback of the caller's raised (is_action, fallback,
            # after_step, describe_turn): raised as itself once the actors are
            # gone, not inside the task group's ExceptionGroup.
            raised = exc
        finally:
            if holding:
                gate.release()  # type: ignore[union-attr]
                holding = False
            if turn_span is not None:  # nothing applied: the environment raised, or cancelled
                failure = trace.error or (error_text(raised) if raised is not None else None)
                _tracing.end_unfinished_turn(turn_span, failure)
            if loop is not None:
                state.disarm()
            # Idle actors leave when their inbox closes; one still in a closed
            # turn's call was cancelled at that turn's deadline.
            _close(replies, actors)
            if tg.tasks and any(actor.scope is not None for actor in actors.values()):
                await _stop_calls(actors, tg.tasks)
    if raised is not None:
        raise raised


_UNKNOWN = object()  # known_roles not computed yet


def _roles_of(env: TurnEnv, policies: Mapping[Any, Policy]) -> frozenset[Any] | None:
    """The roles an episode knows: its environment's turn order and its
    policies' (asked on the turns no policy plays, not on every turn); None
    for a turn order of unhashable roles (nothing to check against)."""
    try:
        return frozenset(getattr(env, "turn_order", None) or ()) | policies.keys()
    except TypeError:
        return None


def _unreadable(exc: Exception, call: str) -> str:
    # An episode's error when what env.reset or env.step returned is no observation.
    return f"{error_text(exc)} (in the observation env.{call} returned)"


def _start_turn_span(tracer: Any, state: EpisodeState, turn: int, role: Any, played: bool) -> Any:
    # A turn's span under the episode's (current in the coordinator); the
    # actor makes it current for the policy call.
    span = tracer.start_span(
        "turn", attributes={"turn.index": turn, "turn.role": _tracing.attribute(role)}
    )
    if played:
        state.trace_context = _tracing.STATE.in_context(span)
    return span


def _outcome(record: TurnRecord, played: bool) -> str:
    # A step's outcome label in the metrics.
    if not played:
        return "no_policy"
    if record.timed_out:
        return "timed_out"
    return "ok" if record.error is None else "error"


LOGGED_ANNOTATIONS: frozenset[str] = frozenset(
    {
        "usage", "prompt_tokens", "completion_tokens", "total_tokens", "attempts",
        "parse_error", "model", "finish_reason", "policy_latency_ms", "llm_latency_ms",
    }
)  # fmt: skip
"""Annotations copied into the ``turn`` log event (``TurnRecord.info`` keeps them all).

The rule: a key of this allow-list whose value is small: None, a bool, a
number, a string (cut to :data:`MAX_LOGGED_TEXT` characters), or a flat
mapping of at most 16 such numbers (token usage). The annotation ``latency_ms``
(the policy's own latency) is logged as ``policy_latency_ms``, since
``latency_ms`` in a ``turn`` event is the turn's. Everything else (an LLM
prompt, completion, token ids, logprobs) belongs to trajectories, not to a log
line per turn.
"""

MAX_LOGGED_TEXT = 200

_SKIP = object()


def _small(value: Any) -> Any:
    """``value`` if fit for a log line (see :data:`LOGGED_ANNOTATIONS`), else ``_SKIP``."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return value if len(value) <= MAX_LOGGED_TEXT else value[:MAX_LOGGED_TEXT] + "..."
    if (
        isinstance(value, Mapping)
        and len(value) <= 16
        and all(v is None or isinstance(v, bool | int | float) for v in value.values())
    ):
        return dict(value)
    return _SKIP


def _turn_extra(
    described: Mapping[str, Any] | None, info: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The ``turn`` event's fields beside the runtime's: ``described`` (a dict
    is handed over, another mapping copied) and the small annotations of
    ``info`` (see :data:`LOGGED_ANNOTATIONS`)."""
    extra = described
    if extra is not None and type(extra) is not dict:
        extra = dict(extra)
    if info:
        for key, value in info.items():
            if key == "latency_ms":
                key = "policy_latency_ms"
            elif key not in LOGGED_ANNOTATIONS:
                continue
            value = _small(value)
            if value is not _SKIP:
                if extra is None:
                    extra = {}
                extra.setdefault(key, value)
    return extra
