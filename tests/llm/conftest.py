"""Fixtures for the LLM tests: a mock server on a free loopback port, a fake turn."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import httpx2
import pytest
from starlette.applications import Starlette

from chaosops.env.models import ChaosOpsObservation
from chaosops.mock_llm import MockLLMConfig, create_app, serve

from .helpers import FakeTurn, first_observation


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class RunningMock:
    """A mock server started for one test."""

    base_url: str
    app: Starlette
    config: MockLLMConfig

    @property
    def stats(self) -> dict[str, Any]:
        return self.app.state.mock.stats.snapshot()

    async def http_stats(self) -> dict[str, Any]:
        """The counters as served over HTTP (``GET /stats``)."""
        root = self.base_url.removesuffix("/v1")
        async with httpx2.AsyncClient() as client:
            return (await client.get(f"{root}/stats")).json()


StartMock = Callable[..., Awaitable[RunningMock]]


@pytest.fixture
async def start_mock() -> AsyncIterator[StartMock]:
    """``mock = await start_mock(latency="5ms", ...)`` starts a mock on 127.0.0.1:0."""
    async with anyio.create_task_group() as tg:

        async def start(**settings: Any) -> RunningMock:
            config = MockLLMConfig(port=0, **settings)
            app = create_app(config)
            port = await tg.start(partial(serve, config, app=app))
            return RunningMock(f"http://127.0.0.1:{port}/v1", app, config)

        yield start
        tg.cancel_scope.cancel()


@pytest.fixture
def fake_turn(monkeypatch: pytest.MonkeyPatch) -> FakeTurn:
    turn = FakeTurn()
    monkeypatch.setattr("chaosops.agents.llm.policy._current_turn", lambda: turn)
    return turn


@pytest.fixture
def observation() -> ChaosOpsObservation:
    return first_observation()
