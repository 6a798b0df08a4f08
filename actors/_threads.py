"""Blocking policies in worker threads, so their deadlines hold."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.to_thread

from ._types import Policy


def in_thread(policy: Policy, *, limiter: anyio.CapacityLimiter | None = None) -> Policy:
    """Wrap a blocking ``policy(obs, role)`` into an async policy run in a worker thread.

    At the turn's deadline the call is abandoned: the turn closes with the
    fallback at once, the thread runs on until the blocking call returns, and
    its result is discarded. ``limiter`` bounds the threads in use (anyio's
    default limiter otherwise). The thread sees the caller's context, so
    :func:`actors.current_turn` works inside it.
    """

    async def call_in_thread(observation: Any, role: Any) -> Any:
        return await anyio.to_thread.run_sync(
            policy, observation, role, abandon_on_cancel=True, limiter=limiter
        )

    call_in_thread.__wrapped__ = policy  # type: ignore[attr-defined]
    call_in_thread.__qualname__ = f"in_thread({getattr(policy, '__qualname__', policy)!s})"
    return call_in_thread
