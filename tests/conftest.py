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


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """On pytest-xdist's ``loadgroup``, each file is one unit (its module
    fixtures set up once, as under ``loadfile``), except the tests that name a
    group: every test that starts a Ray instance is in ``ray``, so that two
    instances never share the two cores."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
