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


_DEFAULTS = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
_MASK = signal.pthread_sigmask(signal.SIG_BLOCK, [])
_LAST = ["the session's start"]


def _unignore() -> list[str]:
    """SIGINT and SIGTERM as a terminal's command has them, where they are
    ignored: the names of those that were."""
    ignored = [signum for signum in _DEFAULTS if signal.getsignal(signum) == signal.SIG_IGN]
    for signum in ignored:
        signal.signal(signum, _DEFAULTS[signum])
    return [f"{signal.Signals(signum).name} ignored" for signum in ignored]


# A suite started as a script's background job (`./.ci/run &`, `nohup ... &`)
# inherits an ignored SIGINT, and so would every command a test starts: their
# Ctrl-C would go unheard.
_unignore()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """No test, nor its fixtures, leaves SIGINT or SIGTERM ignored or blocked
    in this process: every command a later test starts would inherit that,
    and its Ctrl-C would go unheard. Found before the next test, the state is
    restored and that test fails naming the one before it. (A Python
    handler, such as Ray's, is not inherited.)"""
    changed = _unignore()
    if signal.pthread_sigmask(signal.SIG_SETMASK, _MASK) != _MASK:
        changed.append("the signal mask changed")
    if changed:
        pytest.fail(f"{_LAST[0]} (or its fixtures) left {' and '.join(changed)}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    try:
        return (yield)
    finally:
        _LAST[0] = item.nodeid
