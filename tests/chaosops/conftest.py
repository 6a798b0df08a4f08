"""Fixtures shared by chaosops' tests: a mock LLM server on a free loopback port."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import httpx2
import pytest_asyncio
from starlette.applications import Starlette

from chaosops.mock_llm import MockLLMConfig, create_app, serve


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


@pytest_asyncio.fixture
async def start_mock() -> AsyncIterator[StartMock]:
    """``mock = await start_mock(latency="5ms", ...)`` starts a mock on 127.0.0.1:0.

    Each server runs in a task of its own (a fixture's setup and teardown run
    in different tasks, and an anyio task group must be left in the task that
    entered it); the teardown cancels it and waits for it.
    """
    servers: list[tuple[asyncio.Task[None], list[anyio.CancelScope]]] = []

    async def start(**settings: Any) -> RunningMock:
        config = MockLLMConfig(port=0, **settings)
        app = create_app(config)
        ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        scopes: list[anyio.CancelScope] = []

        async def run() -> None:
            try:
                async with anyio.create_task_group() as tg:
                    scopes.append(tg.cancel_scope)
                    ready.set_result(await tg.start(partial(serve, config, app=app)))
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                raise

        servers.append((asyncio.create_task(run()), scopes))
        port = await ready
        return RunningMock(f"http://127.0.0.1:{port}/v1", app, config)

    yield start
    for task, scopes in servers:
        for scope in scopes:
            scope.cancel()
        await asyncio.gather(task, return_exceptions=True)
