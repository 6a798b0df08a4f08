"""Blocking policies in worker threads, so their deadlines hold."""

from __future__ import annotations

import inspect
from typing import Any

import anyio
import anyio.to_thread

from ._context import TurnContext, current_turn, pinned
from ._types import Policy


def in_thread(policy: Policy, *, limiter: anyio.CapacityLimiter | None = None) -> Policy:
    """Wrap a blocking ``policy(obs, role)`` into an async policy run in a worker thread.

    At the turn's deadline the call is abandoned: the turn closes with the
    fallback at once, the thread runs on until the blocking call returns, and
    its result is discarded. ``limiter`` bounds the threads in use (anyio's
    default limiter otherwise). The thread sees the caller's context, so
    :func:`actors.current_turn` works inside it, and gives the turn the call
    was made for even after the deadline (what an abandoned call annotates is
    dropped, never written into a later turn).
    """

    if not callable(policy):
        raise TypeError(
            f"in_thread() takes a blocking policy(observation, role), got {policy!r:.80}"
        )
    if inspect.iscoroutinefunction(policy) or inspect.iscoroutinefunction(
        getattr(policy, "__call__", None)  # noqa: B004 - an object whose __call__ is async
    ):
        raise TypeError(
            f"in_thread() runs blocking policies in a thread; {policy!r:.80} is async: "
            "use it as a policy as it is"
        )

    async def call_in_thread(observation: Any, role: Any) -> Any:
        try:
            turn: TurnContext | None = current_turn()  # the turn this call is for
        except RuntimeError:  # called outside the runtime: nothing to pin
            turn = None
        return await anyio.to_thread.run_sync(
            pinned, turn, policy, observation, role, abandon_on_cancel=True, limiter=limiter
        )

    call_in_thread.__wrapped__ = policy  # type: ignore[attr-defined]
    call_in_thread.__qualname__ = f"in_thread({getattr(policy, '__qualname__', policy)!s})"
    return call_in_thread
