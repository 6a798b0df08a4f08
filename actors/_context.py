"""``current_turn()``: what a policy may know about the turn it is playing."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Protocol

__all__ = ["TurnContext", "current_turn"]


class _TurnState(Protocol):
    # Implemented by the actor: the turn it is playing right now.
    episode_id: str
    role: Any
    turn: int
    deadline: float | None
    info: dict[str, Any] | None


# Set once per actor task (each actor runs in its own task, hence its own
# context). A worker thread started by ``in_thread`` gets a copy with the
# TurnContext of the turn its call was made for (see :func:`pinned`).
CURRENT: ContextVar[Any] = ContextVar("actors.current_turn")


class TurnContext:
    """The turn a policy call is playing: ``episode_id``, ``turn``, ``role``,
    ``deadline`` (on the ``anyio.current_time()`` clock, or None; on asyncio,
    ``time.monotonic()``, the base of the loop's clock, read more finely).

    :meth:`annotate` attaches fields to the turn: they land in the turn
    record's ``info`` and in the ``turn`` log event.
    """

    __slots__ = ("_state", "deadline", "episode_id", "role", "turn")

    def __init__(self, state: _TurnState) -> None:
        self._state = state
        self.episode_id = state.episode_id
        self.turn = state.turn
        self.role = state.role
        self.deadline = state.deadline

    def annotate(self, **fields: Any) -> None:
        """Attach ``fields`` to this turn (later calls update earlier ones).

        Ignored once the turn is over (a late or abandoned call cannot write
        into another turn).
        """
        state = self._state
        if state.turn != self.turn:
            return
        if state.info is None:
            state.info = dict(fields)
        else:
            state.info.update(fields)

    def __repr__(self) -> str:
        return (
            f"TurnContext(episode_id={self.episode_id!r}, turn={self.turn}, "
            f"role={self.role!r}, deadline={self.deadline!r})"
        )


def current_turn() -> TurnContext:
    """The turn being played by the policy call this is called from.

    Raises RuntimeError outside a policy call run by the runtime.
    """
    try:
        state = CURRENT.get()
    except LookupError:
        raise RuntimeError(
            "current_turn() is only available inside a policy call made by the actors runtime"
        ) from None
    if type(state) is TurnContext:  # in an in_thread call: the turn it was made for
        return state
    if state.turn < 0:
        raise RuntimeError("current_turn() called outside a turn")
    return TurnContext(state)


def pinned(turn: TurnContext | None, call: Any, *args: Any) -> Any:
    """``call(*args)`` in a worker thread, where :func:`current_turn` is ``turn``
    (the turn the call was made for) however long the call runs: the actor
    moves on to later turns while an abandoned call still runs, and what the
    call annotates must not land in them."""
    if turn is not None:
        CURRENT.set(turn)  # in the thread's own copy of the context
    return call(*args)
