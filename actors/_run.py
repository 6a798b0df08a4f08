"""Running the runtime from synchronous code, on the fastest asyncio loop at hand."""

from __future__ import annotations

import asyncio
import importlib.util
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

T = TypeVar("T")

LOOPS = ("auto", "asyncio", "uvloop")
"""Accepted values of ``loop`` (and of the ``ACTORS_LOOP`` environment variable)."""


def _uvloop_installed() -> bool:
    return importlib.util.find_spec("uvloop") is not None


def resolve_loop(loop: str | None = None) -> str:
    """``"asyncio"`` or ``"uvloop"``: the event loop :func:`run` will use.

    ``loop`` None takes ``ACTORS_LOOP`` from the environment, else ``"auto"``:
    uvloop when it is installed, the standard loop otherwise.
    """
    source = "loop"
    if loop is None:
        loop, source = os.environ.get("ACTORS_LOOP") or "auto", "ACTORS_LOOP"
    if loop not in LOOPS:
        raise ValueError(f"{source} must be one of {', '.join(LOOPS)}, got {loop!r}")
    if loop == "auto":
        return "uvloop" if _uvloop_installed() else "asyncio"
    if loop == "uvloop" and not _uvloop_installed():
        raise ValueError(f"{source} is 'uvloop' but uvloop is not installed (pip install uvloop)")
    return loop


def new_event_loop(loop: str | None = None) -> asyncio.AbstractEventLoop:
    """A new event loop of the kind :func:`run` would use (see :func:`resolve_loop`),
    for a caller that runs it itself (``run_until_complete``)."""
    if resolve_loop(loop) == "uvloop":
        # not on Windows
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def run(func: Callable[..., Awaitable[T]], *args: Any, loop: str | None = None) -> T:
    """``anyio.run(func, *args)`` on the asyncio backend, on uvloop when installed.

    uvloop runs the same code with a loop written in C, which makes the
    runtime's own work per turn markedly cheaper. ``loop``: ``"auto"`` (the default, or
    ``ACTORS_LOOP`` from the environment), ``"asyncio"`` (the standard loop)
    or ``"uvloop"``. Raises ValueError for anything else.
    """
    chosen = resolve_loop(loop)
    box: list[T] = []

    async def main() -> None:
        # The value is handed over in ``box``, not as the main task's result:
        # when the loop closes, asyncio (3.11) restores its SIGINT handler
        # through ``signal.signal``, which builds the repr of the handler it
        # replaces, a partial holding the main task, and with it the repr of
        # the task's result (the first six items of a list): for a batch's
        # results, a full repr of each with every step, 0.1 s and more.
        box.append(await func(*args))

    anyio.run(main, backend="asyncio", backend_options={"use_uvloop": chosen == "uvloop"})
    return box[0]
