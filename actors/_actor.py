"""One actor per role: reads turn requests, calls its policy, replies."""

from __future__ import annotations

import asyncio
import time
from inspect import isawaitable
from types import GeneratorType
from typing import Any

import anyio
from anyio import ClosedResourceError, EndOfStream

from . import _logging, _tracing
from ._context import CURRENT
from ._mailbox import Mailbox, Replies
from ._metrics import EpisodeMeter
from ._types import Policy, error_text

Request = tuple[int, Any, float | None]
"""(turn index, observation, deadline or None) sent to an actor's inbox."""

Reply = tuple[int, Any, Any, BaseException | None, dict[str, Any] | None]
"""(turn index, role, result, exception raised or None, annotations or None)."""

# Types of sync policy results known not to be awaitable: ``inspect.isawaitable``
# runs an ABC check on every call, a set lookup is cheaper. Bounded (a few
# action types in practice); generators are never cached (awaitable or not
# depends on the instance).
_PLAIN_TYPES: set[type] = set()
_MAX_PLAIN_TYPES = 256


_ASYNCIO_SCOPE_CLASS: list[type[anyio.CancelScope]] = []


def _scope_class(on_asyncio: bool) -> type[anyio.CancelScope]:
    """The running backend's CancelScope class (looked up once on asyncio)."""
    if not on_asyncio:
        return type(anyio.CancelScope())
    if not _ASYNCIO_SCOPE_CLASS:
        _ASYNCIO_SCOPE_CLASS.append(type(anyio.CancelScope()))
    return _ASYNCIO_SCOPE_CLASS[0]


class EpisodeState:
    """What the coordinator shares with its actors: the turn that is open.

    ``open_turn`` is -1 between turns; an actor whose reply is for another turn
    drops it (the turn was closed at its deadline). :meth:`close_turn` closes a
    turn at its deadline.

    On asyncio the deadlines of an episode share one loop timer (:meth:`arm`):
    a timer still armed for an earlier turn's deadline is kept when the next
    deadline is later, and re-armed when it fires early. A turn answered in
    time costs no timer of its own; a closed turn costs one, as before.
    """

    __slots__ = (
        "clock", "closed_info", "episode_id", "loop", "meter", "open_actor", "open_deadline",
        "open_turn", "replies", "scope_class", "timer", "timer_when", "trace_context",
    )  # fmt: skip

    def __init__(
        self,
        episode_id: str,
        replies: Mailbox[Reply] | Replies[Reply],
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.episode_id = episode_id
        self.open_turn = -1
        self.replies = replies
        # The running backend's CancelScope class: ``anyio.CancelScope()`` looks
        # the backend up on every call (a few us); looked up once on asyncio.
        self.scope_class: type[anyio.CancelScope] = _scope_class(loop is not None)
        # Annotations a timed-out call made before its deadline (see close_turn).
        self.closed_info: dict[str, Any] | None = None
        # asyncio: the running loop, the open turn's actor and deadline (None:
        # no deadline), and the episode's one armed timer with the loop time it
        # is due at. None on other backends.
        self.loop = loop
        # The clock deadlines are set and judged on (see turn_clock).
        self.clock = turn_clock(loop)
        self.open_actor: Actor | None = None
        self.open_deadline: float | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.timer_when = 0.0
        # While tracing: the open turn's span as an OpenTelemetry context, made
        # current in the actor for the policy call.
        self.trace_context: Any = None
        # The episode's metrics, None when off.
        self.meter: EpisodeMeter | None = None

    def arm(self, actor: Actor, deadline: float) -> None:
        """Make sure a timer fires by ``deadline``, the open turn's (asyncio)."""
        self.open_actor, self.open_deadline = actor, deadline
        timer = self.timer
        if timer is None or self.timer_when > deadline:
            if timer is not None:
                timer.cancel()
            self._start_timer(deadline, 0.0)

    def _start_timer(self, deadline: float, least: float) -> None:
        # A delay on self.clock, whatever the base of the loop's own clock;
        # ``least``: the shortest wait (a timer that fired a little early
        # waits a millisecond rather than spinning through loop passes).
        assert self.loop is not None
        self.timer_when = deadline
        self.timer = self.loop.call_later(max(deadline - self.clock(), least), self._on_timer)

    def _on_timer(self) -> None:
        # Close the open turn if its deadline is due, else wait for it.
        self.timer = None
        deadline = self.open_deadline
        if self.open_turn < 0 or deadline is None:
            return
        if deadline <= self.timer_when and self.clock() >= deadline:
            assert self.open_actor is not None
            self.close_turn(self.open_actor, self.open_turn)
        else:  # a later deadline, or fired early (uvloop counts whole milliseconds)
            self._start_timer(deadline, _EARLY_WAIT_S)

    def disarm(self) -> None:
        """Cancel the armed timer (the episode is over)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.open_actor = None  # it refers back to this state: no cycle left to the collector

    def close_turn(self, actor: Actor, turn: int) -> None:
        """Close ``turn`` at its deadline (``actor`` plays it); no-op once it is closed.

        Runs from the episode's timer callback on asyncio (see :meth:`arm`),
        or from the coordinator on other backends. Synchronously: no reply for
        the turn can be accepted any more, the annotations made so far are kept
        for the record, the policy call in flight is cancelled through its
        cancel scope (from a loop callback there is no current task, so anyio's
        ``cancel()`` stays cheap), and the coordinator's wait wakes up.
        """
        if self.open_turn != turn:
            return
        self.open_turn = -1
        if actor.turn == turn:
            info = actor.info
            if info:
                # A copy: a call still running (say, in a thread) cannot write
                # into the record any more; later annotate() calls are dropped.
                actor.info = None
                self.closed_info = dict(info)
            scope = actor.scope
            if scope is not None:
                scope.cancel()
        self.replies.expire()


class Actor:
    """The task playing one role of one episode (also its ``current_turn`` state)."""

    __slots__ = (
        "deadline", "episode", "episode_id", "inbox", "info", "instant", "policy", "role",
        "scope", "started", "turn",
    )  # fmt: skip

    def __init__(self, role: Any, policy: Policy, episode: EpisodeState, inbox: Mailbox[Request]):
        self.role = role
        self.policy = policy
        self.episode = episode
        self.episode_id = episode.episode_id
        self.inbox = inbox
        self.turn = -1
        self.deadline: float | None = None
        self.info: dict[str, Any] | None = None
        # The cancel scope of the async policy call in flight, None between calls.
        self.scope: anyio.CancelScope | None = None
        # The coordinator's guess that this policy replies within a pass of the
        # loop (see actors._gate): true until a reply says otherwise.
        self.instant = True
        # Whether the coordinator started this actor's task: at the role's first turn.
        self.started = False

    async def run(self, replies: Mailbox[Reply] | Replies[Reply]) -> None:
        """Serve turn requests until the inbox closes or the episode cancels us."""
        CURRENT.set(self)
        inbox, policy, role, episode = self.inbox, self.policy, self.role, self.episode
        cancel_scope = episode.scope_class
        on_asyncio = inbox.on_asyncio
        # The coordinator's clock, the one deadlines are on.
        clock = episode.clock
        # What the policy logs with structlog carries episode_id (bound by the
        # coordinator), role and turn (bound here, in this task's own context).
        bind_turn = _logging.bind_actor(role)
        while True:
            if on_asyncio:
                # Wait on the inbox's future right here (no coroutine between).
                request = inbox.take()
                while request is None:
                    if inbox.closed:
                        return  # the episode is over
                    await inbox.waiter()
                    request = inbox.take()
            else:
                try:
                    request = await inbox.get()
                except (EndOfStream, ClosedResourceError):
                    return
            turn, observation, deadline = request
            if turn != episode.open_turn:
                continue  # closed at its deadline while waiting in the inbox
            self.turn, self.deadline, self.info = turn, deadline, None
            bind_turn(turn)
            error: BaseException | None = None
            result: Any = None
            trace_context = episode.trace_context
            traced = _tracing.STATE.attach(trace_context) if trace_context is not None else None
            try:
                result = policy(observation, role)
                if type(result) in _PLAIN_TYPES:
                    pass
                elif isawaitable(result):
                    # The coordinator closes the turn at its deadline (or stops
                    # the episode) by cancelling this scope: the call sees a
                    # cancellation, and its shielded parts are honoured.
                    with cancel_scope() as scope:
                        self.scope = scope
                        result = await result
                    self.scope = None
                    if scope.cancelled_caught:
                        self.turn = -1
                        continue
                elif type(result) is not GeneratorType and len(_PLAIN_TYPES) < _MAX_PLAIN_TYPES:
                    _PLAIN_TYPES.add(type(result))
            except Exception as exc:  # a policy bug costs its turn only
                self.scope = None
                error = exc
            except asyncio.CancelledError as exc:
                # Raised by the policy itself (it awaited a future that someone
                # else cancelled), not a cancellation of this task: a policy
                # bug too. Ending the actor would leave its role's turns unplayed.
                if not _raised_by_the_policy(on_asyncio):
                    raise
                self.scope = None
                error = exc
            finally:
                if traced is not None:
                    _tracing.STATE.detach(traced)
            info, self.info, self.turn = self.info, None, -1
            if episode.open_turn != turn or (deadline is not None and clock() >= deadline):
                # Came back after its deadline: the turn was closed (the call
                # shielded itself from the cancellation), or its deadline has
                # passed and the timer that closes it has not run yet (the loop
                # was busy, or the call blocked it). Either way too late, and
                # the turn closes timed out, keeping the annotations made.
                if episode.open_turn == turn:
                    self.turn, self.info = turn, info  # for close_turn
                log_late_reply(self.episode_id, turn, role, error, episode.meter)
                error = None
                continue
            if error is not None and _logging.log_enabled(_logging.ERROR):
                _logging.STATE.logger.error(
                    "policy_error",
                    episode_id=self.episode_id,
                    turn=turn,
                    role=role,
                    exc_info=error,
                )
            reply = (turn, role, result, error, info)
            try:
                if not replies.try_put(reply):
                    await replies.put(reply)
            except ClosedResourceError:
                # The episode ended (cancelled) while this call was finishing:
                # nothing is waiting for the reply any more.
                return
            # An exception's traceback refers to this frame: holding it here
            # would make a cycle only the garbage collector frees.
            reply = error = None


def turn_clock(loop: asyncio.AbstractEventLoop | None) -> Any:
    """The clock an episode's deadlines are set and judged on.

    On asyncio, ``time.monotonic``: the standard loop's own clock, and the
    base of uvloop's, whose ``loop.time()`` has a millisecond's resolution and
    is read once per loop iteration, so that a deadline set or judged on it
    could fall up to about a millisecond early (a reply in time dropped as
    late, a 1 ms deadline missed by an instant policy). The loop's clock for
    a loop whose time is on another base; ``anyio.current_time`` elsewhere.
    """
    if loop is None:
        return anyio.current_time
    if abs(loop.time() - time.monotonic()) < _SAME_BASE_S:
        return time.monotonic
    return loop.time


_SAME_BASE_S = 0.05
_EARLY_WAIT_S = 0.001


def _raised_by_the_policy(on_asyncio: bool) -> bool:
    """Whether a CancelledError came from the policy's code rather than from a
    cancellation of the actor's task: on asyncio, no cancellation of the task
    is pending (anyio's and asyncio's cancellations both request one); on
    another backend, whose cancellation is not asyncio's, always."""
    if not on_asyncio:
        return True
    task = asyncio.current_task()
    return task is not None and task.cancelling() == 0


def log_late_reply(
    episode_id: str,
    turn: int,
    role: Any,
    error: BaseException | None = None,
    meter: EpisodeMeter | None = None,
) -> None:
    """Log ``late_reply_dropped`` for a reply that came after its turn's deadline
    (when the late call raised: ``error``, ``"Type: message"``, and its traceback
    as ``exception``, the nearest a dropped call's error gets to a
    ``policy_error``), and count it."""
    if meter is not None:
        meter.late_reply(role)
    if _tracing.STATE.tracer is not None:
        _tracing.late_reply(turn, role)
    if _logging.log_enabled(_logging.INFO):
        raised = {} if error is None else {"error": error_text(error), "exc_info": error}
        _logging.STATE.logger.info(
            "late_reply_dropped", episode_id=episode_id, turn=turn, role=role, **raised
        )
