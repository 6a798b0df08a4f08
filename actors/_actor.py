"""One actor per role: reads turn requests from its inbox, calls its policy, replies."""

from __future__ import annotations

import asyncio
import functools
from inspect import isawaitable
from types import GeneratorType
from typing import Any, NamedTuple

import anyio
from anyio import ClosedResourceError, EndOfStream
from structlog.contextvars import bind_contextvars

from . import _logging, _tracing
from ._asyncio import cancelled_by_the_policy
from ._backend import Inbox
from ._context import CURRENT
from ._metrics import EpisodeMeter
from ._slot import TurnSlot
from ._types import Policy, error_text


class Request(NamedTuple):
    """What the coordinator sends an actor: play ``turn`` by ``deadline``."""

    turn: int
    observation: Any
    deadline: float | None


class Reply(NamedTuple):
    """What an actor sends back: the policy's ``action``, or the ``error`` it
    raised, and when the call returned (``answered``, on the episode's clock:
    the moment judged against the deadline, and the end of the turn's latency)."""

    turn: int
    role: Any
    action: Any
    error: BaseException | None
    info: dict[str, Any] | None
    answered: float


_CANCELLED = object()  # the call was cancelled at its turn's deadline


class Actor:
    """The task playing one role of one episode; also what ``current_turn()`` reads.

    ``turn``, ``deadline`` and ``info`` describe the call in flight (``turn``
    is -1 between calls); ``scope`` is the cancel scope of an async call in
    flight, which closing the turn at its deadline cancels.
    """

    def __init__(self, role: Any, policy: Policy, slot: TurnSlot, inbox: Inbox[Request]):
        self.role = role
        self.policy = policy
        self.slot = slot  # the episode's turn, shared with its coordinator
        self.episode_id = slot.episode_id
        self.inbox = inbox
        self.turn = -1
        self.deadline: float | None = None
        self.info: dict[str, Any] | None = None
        self.scope: anyio.CancelScope | None = None
        # The coordinator's guess that this policy replies within a pass of the
        # event loop (see actors._gate): true until a reply says otherwise.
        self.instant = True
        self.started = False  # the task starts at the role's first turn

    async def run(self) -> None:
        """Serve turn requests until the inbox closes or the episode cancels us."""
        CURRENT.set(self)
        # What the policy logs carries its role and turn (and the episode's id,
        # bound by the coordinator), in this task's own context.
        bind_contextvars(role=self.role)
        while True:
            try:
                request = await self.inbox.get()
            except (EndOfStream, ClosedResourceError):
                return  # the episode is over
            if request.turn != self.slot.open_turn:
                continue  # closed at its deadline while waiting in the inbox
            reply = await self._play(request)
            if reply is None:
                continue
            try:
                await self.slot.replies.put(reply)
            except ClosedResourceError:
                return  # the episode ended while this call was finishing

    async def _play(self, request: Request) -> Reply | None:
        """Call the policy for ``request``; None when the reply is too late to send."""
        turn = request.turn
        self.turn, self.deadline, self.info = turn, request.deadline, None
        bind_contextvars(turn=turn)
        outcome = await self._call(request.observation)
        answered = self.slot.replies.clock()
        info, self.info, self.turn = self.info, None, -1
        if outcome is _CANCELLED:
            return None
        action, error = outcome
        if self._too_late(request, info, answered):
            log_late_reply(self.episode_id, turn, self.role, error, self.slot.meter)
            return None
        if error is not None and _logging.log_enabled(_logging.ERROR):
            _logging.get_logger().error(
                "policy_error",
                episode_id=self.episode_id,
                turn=turn,
                role=self.role,
                exc_info=error,
            )
        return Reply(turn, self.role, action, error, info, answered)

    async def _call(self, observation: Any) -> Any:
        """``(action, None)``, ``(None, exception)``, or ``_CANCELLED`` at the deadline."""
        trace_context = self.slot.trace_context
        attached = _tracing.STATE.attach(trace_context) if trace_context is not None else None
        try:
            result = self.policy(observation, self.role)
            if _is_awaitable(result):
                with anyio.CancelScope() as scope:
                    self.scope = scope
                    result = await result
                if scope.cancelled_caught:
                    return _CANCELLED
            return result, None
        except Exception as exc:  # a policy bug costs its turn only
            return None, exc
        except asyncio.CancelledError as exc:
            # Raised by the policy's own code, not a cancellation of this task:
            # a policy bug too (ending the actor would leave its turns unplayed).
            if self.slot.on_asyncio and not cancelled_by_the_policy():
                raise
            return None, exc
        finally:
            self.scope = None
            if attached is not None:
                _tracing.STATE.detach(attached)

    def _too_late(self, request: Request, info: dict[str, Any] | None, answered: float) -> bool:
        """Whether the turn was closed, or its deadline passed, while the call ran.

        A call may come back late when it shielded itself from the
        cancellation, or blocked the loop past its deadline. A turn not closed
        yet keeps the annotations made, for the coordinator closing it.
        """
        slot = self.slot
        if slot.open_turn != request.turn:
            return True
        deadline = request.deadline
        if deadline is None or answered < deadline:
            return False
        self.turn, self.info = request.turn, info
        return True


def _is_awaitable(value: Any) -> bool:
    # inspect.isawaitable without its ABC check on every plain action: a class
    # with __await__, or a generator-based coroutine.
    kind: Any = type(value)  # a class is hashable: the cache's key
    return _awaits(kind) or (isinstance(value, GeneratorType) and isawaitable(value))


@functools.lru_cache(maxsize=256)
def _awaits(cls: type) -> bool:
    # Asked once per type: a pydantic model's class answers a missing
    # attribute through its metaclass's Python __getattr__, a raise each turn.
    return hasattr(cls, "__await__")


def log_late_reply(
    episode_id: str,
    turn: int,
    role: Any,
    error: BaseException | None = None,
    meter: EpisodeMeter | None = None,
) -> None:
    """Log and count ``late_reply_dropped`` for a reply that came after its turn
    closed (when the late call raised: ``error`` and its traceback as ``exception``)."""
    if meter is not None:
        meter.late_reply(role)
    if _tracing.STATE.tracer is not None:
        _tracing.late_reply(turn, role)
    if _logging.log_enabled(_logging.INFO):
        raised = {} if error is None else {"error": error_text(error), "exc_info": error}
        _logging.get_logger().info(
            "late_reply_dropped", episode_id=episode_id, turn=turn, role=role, **raised
        )
