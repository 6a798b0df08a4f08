"""Async tests run on pytest-asyncio, on the standard event loop and on uvloop
(what the synchronous entry points use when installed); the trio check runs on
anyio's marker."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Mapping
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
