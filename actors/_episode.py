"""An episode in play: the coordinator that owns the environment and the turn order."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import anyio
from structlog.contextvars import bind_contextvars, reset_contextvars, unbind_contextvars

from . import _logging, _metrics, _tracing
from ._actor import Actor, Reply, Request, log_late_reply
from ._annotations import turn_fields
from ._backend import Inbox, current_backend
from ._gate import CURRENT_GATE, INSTANT_S, Permit
from ._slot import TurnSlot
from ._types import EpisodeTrace, Policy, TurnEnv, TurnRecord, error_text


class EnvironmentFailed(Exception):
    """The environment raised, or returned no observation: the episode fails."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


@dataclass(frozen=True, slots=True)
class EpisodeHooks:
    """The caller's callbacks and fields (see :func:`actors.run_episode`)."""

    fallback: Callable[[Any], Any]
    is_action: Callable[[object], bool]
    reset_kwargs: Mapping[str, Any] = field(default_factory=dict)
    log_fields: Mapping[str, Any] | None = None
    describe_turn: Callable[[TurnRecord], Mapping[str, Any]] | None = None
    describe_finish: Callable[[TurnEnv, EpisodeTrace], Mapping[str, Any]] | None = None
    after_step: Callable[[TurnEnv, TurnRecord], None] | None = None
    record_turns: bool = True


@dataclass(slots=True)
class Outcome:
    """What a turn applies: the action, and how the policy's reply went."""

    action: Any
    timed_out: bool = False
    error: str | None = None
    latency_s: float = 0.0
    info: dict[str, Any] | None = None


class Episode:
    """One episode: resets the environment, then plays turn after turn.

    Each turn sends the observation to the actor of ``observation.turn_role``,
    waits for its reply until the role's deadline, steps the environment with
    one action, and records, logs, traces and counts the step. ``slot.open_turn``
    is the turn whose reply is awaited (-1 between turns): an actor drops a
    reply for any other.
    """

    def __init__(
        self,
        env: TurnEnv,
        policies: Mapping[Any, Policy],
        timeouts: Mapping[Any, float | None],
        max_turns: int,
        hooks: EpisodeHooks,
        episode_id: str,
    ) -> None:
        self.env = env
        self.timeouts = timeouts
        self.max_turns = max_turns
        self.hooks = hooks
        self.episode_id = episode_id
        self.trace = EpisodeTrace(episode_id=episode_id)
        # One way of waiting, chosen once, for the whole episode.
        self.backend = current_backend()
        self.on_asyncio = self.backend.on_asyncio
        mailbox = self.backend.mailbox
        self.replies: Inbox[Reply] = mailbox(len(policies) + 1)
        # what the actors see of the episode: the open turn, the replies' mailbox
        self.slot = TurnSlot(episode_id, self.replies, self.on_asyncio)
        self.actors = {
            role: Actor(role, policy, self.slot, mailbox(1)) for role, policy in policies.items()
        }
        self.turn = 0
        self.closed_info: dict[str, Any] | None = None  # what a timed-out call annotated
        self.turn_span: Any = None
        self.meter: _metrics.EpisodeMeter | None = None  # set by play() when metrics are on
        self.gate = CURRENT_GATE.get() if self.on_asyncio else None
        self.permit = Permit()
        self._known_roles: frozenset[Any] | None = None
        self._tasks: Any = None  # the actors' task group while turns are played

    # ------------------------------------------------------------ the episode

    async def play(self) -> EpisodeTrace:
        """Play the episode to its end; the trace says how it went."""
        tokens = bind_contextvars(episode_id=self.episode_id)
        span = token = described = None
        started = perf_counter()
        try:
            if _tracing.STATE.tracer is not None:
                span, token = _tracing.start_episode(
                    _tracing.STATE.tracer, self.episode_id, self.hooks.log_fields
                )
            self._start()
            try:
                await self._reset_and_play()
            except BaseException as exc:
                self._abandon(exc, started)
                raise
            described = self._finish(started, span is not None)
            return self.trace
        finally:
            self._close_mailboxes()
            self.actors = {}  # they refer back to the episode: no cycle left for the collector
            if span is not None:
                _tracing.end_episode(span, token, self.trace, described)
            try:
                reset_contextvars(**tokens)
            except ValueError:  # closed from another context (a coroutine collected unfinished)
                unbind_contextvars("episode_id")

    def _start(self) -> None:
        meter = _metrics.STATE.meter
        self.meter = meter.episode(self.hooks.log_fields) if meter is not None else None
        self.slot.meter = self.meter
        if _logging.log_enabled(_logging.INFO):
            _logging.emit(
                "episode_started", {"episode_id": self.episode_id, **(self.hooks.log_fields or {})}
            )

    async def _reset_and_play(self) -> None:
        try:
            observation = self.env.reset(**self.hooks.reset_kwargs)
        except Exception as exc:
            self.trace.status, self.trace.error = "failed", error_text(exc)
            return
        await self._play_turns(observation)

    def _finish(self, started: float, traced: bool) -> Mapping[str, Any] | None:
        """Count and log the end of a played episode; returns ``describe_finish``'s fields."""
        trace = self.trace
        trace.wall_s = perf_counter() - started
        if self.meter is not None:
            self.meter.finished(trace.status)
        logged = _logging.log_enabled(_logging.INFO)
        described = None
        if self.hooks.describe_finish is not None and (logged or traced):
            described = self.hooks.describe_finish(self.env, trace)
        if logged:
            self._log_finished(described)
        return described

    def _abandon(self, exc: BaseException, started: float) -> None:
        """Cancelled, or a callback of the caller's raised: still say how it ended."""
        trace = self.trace
        if isinstance(exc, anyio.get_cancelled_exc_class()):
            trace.status, trace.error = "cancelled", None
        else:
            trace.status, trace.error = "error", error_text(exc)
        if self.meter is not None:
            self.meter.finished(trace.status)
        if _logging.log_enabled(_logging.INFO):
            trace.wall_s = perf_counter() - started
            self._log_finished(None)  # abandoned mid-way: describe_finish is not asked

    def _log_finished(self, described: Mapping[str, Any] | None) -> None:
        trace = self.trace
        _logging.emit(
            "episode_finished",
            {
                "episode_id": trace.episode_id,
                "status": trace.status,
                "error": trace.error,
                **(described or {}),
                "timeouts": trace.timeouts,
                "errors": trace.errors,
                "wall_s": round(trace.wall_s, 6),
            },
        )

    # ------------------------------------------------------------- the turns

    async def _play_turns(self, observation: Any) -> None:
        """The actors' task group around the turn loop."""
        raised: Exception | None = None
        async with self.backend.task_group() as tasks:
            self._tasks = tasks
            try:
                await self._turn_loop(observation)
            except EnvironmentFailed as failure:
                self.trace.status, self.trace.error = "failed", failure.error
            except Exception as exc:
                raised = exc  # a callback's: raised as itself once the actors are gone
            except BaseException:  # cancelled: end the calls in flight the anyio way first
                self._wind_down(None)
                await self.backend.settle(tasks)
                raise
            self._wind_down(raised)
        self._tasks = None
        if raised is not None:
            raise raised

    async def _turn_loop(self, observation: Any) -> None:
        self.trace.final_observation = observation
        done = self._is_done(observation, "reset")
        while not done and self.turn < self.max_turns:
            record, done = await self._play_turn(observation)
            observation = self.trace.final_observation = record.next_observation
            self.turn += 1

    async def _play_turn(self, observation: Any) -> tuple[TurnRecord, bool]:
        """One turn: ask the role's actor (or play the fallback), step, report."""
        role = self._turn_role(observation)
        actor = self.actors.get(role)
        self._start_turn_span(role, played=actor is not None)
        if actor is None:
            self._check_known_role(role)
            outcome = Outcome(self.hooks.fallback(role))
        else:
            outcome = await self._ask(actor, observation)
        next_observation = self._step(outcome.action)
        done = self._is_done(next_observation, "step")
        record = TurnRecord(
            self.turn,
            role,
            observation,
            outcome.action,
            next_observation,
            outcome.timed_out,
            outcome.error,
            outcome.latency_s,
            outcome.info if outcome.info is not None else {},
        )
        self._report(record, done, played=actor is not None)
        return record, done

    async def _ask(self, actor: Actor, observation: Any) -> Outcome:
        """Send ``observation`` to ``actor``; its reply, or the fallback at the deadline."""
        await self._admit(actor)
        self._start_actor(actor)
        sent = self.replies.clock()
        deadline = self._deadline(actor, sent)
        reply = await self._exchange(actor, observation, deadline)
        # to the answer, not to when this loop got round to reading it
        latency = (self.replies.clock() if reply is None else reply.answered) - sent
        self._learn_instant(actor, reply, latency)
        return self._outcome(actor.role, reply, latency)

    async def _admit(self, actor: Actor) -> None:
        """The batch's gate decides when the turn is played (see actors._gate)."""
        if self.gate is not None:
            await self.gate.admit(self.permit, actor.instant, mid_episode=self.turn > 0)

    def _start_actor(self, actor: Actor) -> None:
        """An actor's task starts at its role's first turn."""
        if not actor.started:
            actor.started = True
            assert self._tasks is not None
            self._tasks.start_soon(actor.run)

    def _deadline(self, actor: Actor, sent: float) -> float | None:
        timeout = self.timeouts[actor.role]
        return None if timeout is None else sent + timeout

    async def _exchange(self, actor: Actor, observation: Any, deadline: float | None) -> Any:
        """Open the turn, send the request, wait for its reply (None once the
        deadline closed it), close the turn."""
        self.slot.open_turn = self.turn
        actor.inbox.put_latest(Request(self.turn, observation, deadline))
        if self.permit.held and (reply := await self._reply_in_one_pass(actor)) is not None:
            self.slot.open_turn = -1
            return reply
        reply = await self._reply_by(actor, deadline)
        self.slot.open_turn = -1
        return reply

    def _learn_instant(self, actor: Actor, reply: Reply | None, latency: float) -> None:
        """Update the guess that the actor's policy replies within a pass of the loop."""
        if self.gate is not None and (reply is None or not self.permit.held):
            actor.instant = reply is not None and latency < INSTANT_S

    async def _reply_in_one_pass(self, actor: Actor) -> Reply | None:
        """An instant policy's reply, there after one pass of the loop; else the
        permit goes back (the policy is no instant one after all) and None."""
        await self.backend.one_pass()
        reply = self._take_reply()
        if reply is None:
            self.gate.leave(self.permit)  # type: ignore[union-attr]
            actor.instant = False
        return reply

    async def _reply_by(self, actor: Actor, deadline: float | None) -> Reply | None:
        """The open turn's reply, or None once its deadline closed the turn
        (replies to earlier turns are logged and dropped)."""
        while True:
            reply: Reply | None
            if deadline is None:
                reply = await self.replies.get()
            else:
                reply = await self.replies.get_before(deadline)
            if reply is None:
                self._close_turn(actor)
                return None
            if reply.turn == self.turn:
                return reply
            log_late_reply(self.episode_id, reply.turn, reply.role, meter=self.meter)

    def _take_reply(self) -> Reply | None:
        """The open turn's reply if it is there already (late ones logged and dropped)."""
        while (reply := self.replies.take()) is not None:
            if reply.turn == self.turn:
                return reply
            log_late_reply(self.episode_id, reply.turn, reply.role, meter=self.meter)
        return None

    def _close_turn(self, actor: Actor) -> None:
        """Close the open turn at its deadline: no reply is accepted any more, the
        annotations made so far are kept, the policy call in flight is cancelled."""
        self.slot.open_turn = -1
        if actor.turn == self.turn:
            if actor.info:  # a copy: a call still running in a thread cannot write into it
                self.closed_info, actor.info = dict(actor.info), None
            if actor.scope is not None:
                actor.scope.cancel()

    def _outcome(self, role: Any, reply: Reply | None, latency: float) -> Outcome:
        """The action a reply (or its absence) makes the turn apply."""
        if reply is None:
            info, self.closed_info = self.closed_info, None
            return Outcome(self.hooks.fallback(role), True, None, latency, info)
        error = None
        if reply.error is not None:
            error = error_text(reply.error)
        elif not self.hooks.is_action(reply.action):
            error = f"TypeError: policy returned {reply.action!r:.200}, not an action"
            if _logging.log_enabled(_logging.ERROR):
                _logging.get_logger().error(
                    "policy_error",
                    episode_id=self.episode_id,
                    turn=self.turn,
                    role=role,
                    exception=error,
                )
        action = reply.action if error is None else self.hooks.fallback(role)
        return Outcome(action, False, error, latency, reply.info)

    # ------------------------------------------------- the environment's side

    def _turn_role(self, observation: Any) -> Any:
        try:
            role = observation.turn_role
            hash(role)
        except Exception as exc:  # no turn_role, or an unhashable one
            raise EnvironmentFailed(_unreadable(exc, "step" if self.turn else "reset")) from None
        return role

    def _check_known_role(self, role: Any) -> None:
        """A role no policy plays must be one of the environment's turn order or
        the policies' (else the environment failed, not the fallback)."""
        if self._known_roles is None:
            try:
                order = frozenset(getattr(self.env, "turn_order", None) or ())
            except TypeError:  # unhashable roles: nothing to check against
                return
            self._known_roles = order | self.actors.keys()
        if role not in self._known_roles:
            error = ValueError(
                f"turn_role {role!r:.80} is not a role of the environment's turn_order"
            )
            raise EnvironmentFailed(_unreadable(error, "step" if self.turn else "reset"))

    def _step(self, action: Any) -> Any:
        try:
            return self.env.step(action)
        except Exception as exc:
            raise EnvironmentFailed(error_text(exc)) from None

    def _is_done(self, observation: Any, call: str) -> bool:
        """``observation.done``; a value that is no observation fails the episode."""
        try:
            done = bool(observation.done)
            if call == "step":
                observation.reward  # noqa: B018 - read: every step's observation has one
        except Exception as exc:
            raise EnvironmentFailed(_unreadable(exc, call)) from None
        return done

    # ------------------------------------------------------ after each step

    def _report(self, record: TurnRecord, done: bool, played: bool) -> None:
        """Count, record, log, trace and meter one applied step."""
        trace = self.trace
        if record.timed_out:
            trace.timeouts += 1
        elif record.error is not None:
            trace.errors += 1
        if self.hooks.record_turns:
            trace.turns.append(record)
        if self.hooks.after_step is not None:
            self.hooks.after_step(self.env, record)
        logged = _logging.log_enabled(_logging.INFO)
        if logged or self.turn_span is not None:
            describe = self.hooks.describe_turn
            described = describe(record) if describe is not None else None
            if self.turn_span is not None:
                self.slot.trace_context = None
                _tracing.end_turn(self.turn_span, record, described, done)
                self.turn_span = None
            if logged:
                self._log_turn(record, described, done)
        if self.meter is not None:
            latency = record.latency_s if played else None
            self.meter.turn(record.role, _outcome_label(record, played), latency, record.info)

    def _log_turn(self, record: TurnRecord, described: Any, done: bool) -> None:
        fields = turn_fields(described, record.info)
        fields.pop("event", None)
        fields.update(
            episode_id=self.episode_id,
            turn=record.turn,
            role=record.role,
            reward=record.next_observation.reward,
            done=done,
            timed_out=record.timed_out,
            error=record.error,
            latency_ms=round(record.latency_s * 1000, 3),
        )
        _logging.emit("turn", fields)

    def _start_turn_span(self, role: Any, played: bool) -> None:
        tracer = _tracing.STATE.tracer
        if tracer is None:
            return
        self.turn_span = tracer.start_span(
            "turn", attributes={"turn.index": self.turn, "turn.role": _tracing.attribute(role)}
        )
        if played:  # the actor makes it current for the policy call
            self.slot.trace_context = _tracing.STATE.in_context(self.turn_span)

    # ---------------------------------------------------------------- the end

    def _wind_down(self, raised: Exception | None) -> None:
        """Leave the gate, end an unfinished turn's span, close the mailboxes and
        cancel the calls in flight: the actors' tasks end."""
        if self.gate is not None:
            self.gate.leave(self.permit)
        if self.turn_span is not None:  # nothing applied: the environment raised, or cancelled
            failure = self.trace.error or (error_text(raised) if raised is not None else None)
            _tracing.end_unfinished_turn(self.turn_span, failure)
            self.turn_span = None
        self._close_mailboxes()
        for actor in self.actors.values():
            if actor.scope is not None:
                actor.scope.cancel()

    def _close_mailboxes(self) -> None:
        # Idle actors see their inbox closed and end; closing twice is harmless.
        self.replies.close()
        for actor in self.actors.values():
            actor.inbox.close()


def _unreadable(exc: Exception, call: str) -> str:
    # An episode's error when what env.reset or env.step returned is no observation.
    return f"{error_text(exc)} (in the observation env.{call} returned)"


def _outcome_label(record: TurnRecord, played: bool) -> str:
    # A step's outcome label in the metrics.
    if not played:
        return "no_policy"
    if record.timed_out:
        return "timed_out"
    return "ok" if record.error is None else "error"
