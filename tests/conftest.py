"""Async tests run on pytest-asyncio, on the standard event loop and on uvloop
(what the synchronous entry points use when installed); the trio check runs on
anyio's marker."""

from __future__ import annotations

import asyncio
import importlib.util
import signal
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    factories: dict[str, Callable[[], Any]] = {"asyncio": asyncio.new_event_loop}
    if importlib.util.find_spec("uvloop") is not None:
        import uvloop

        factories["uvloop"] = uvloop.new_event_loop
    return factories


@pytest.fixture(scope="session")
def canonical_size() -> int:
    """How many episodes the canonical suites plan (what a run plays by default)."""
    from chaosops.scenarios import canonical_suite_paths, load_scenarios

    return sum(len(load_scenarios(path)) for path in canonical_suite_paths())


_HELD = (signal.SIGINT, signal.SIGTERM)


@pytest.fixture(autouse=True)
def _signals_as_found(request: pytest.FixtureRequest) -> Iterator[None]:
    """No test leaves SIGINT or SIGTERM ignored or blocked in this process:
    every command a later test starts would inherit that, and its Ctrl-C
    would go unheard. (A Python handler, such as Ray's, is not inherited.)"""
    handlers = [signal.getsignal(signum) for signum in _HELD]
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    changed = []
    for signum, handler in zip(_HELD, handlers, strict=True):
        if signal.getsignal(signum) == signal.SIG_IGN != handler:
            signal.signal(signum, handler)
            changed.append(f"{signal.Signals(signum).name} ignored")
    if signal.pthread_sigmask(signal.SIG_SETMASK, mask) != mask:
        changed.append("the signal mask changed")
    if changed:
        pytest.fail(f"{request.node.nodeid} left {' and '.join(changed)}")
