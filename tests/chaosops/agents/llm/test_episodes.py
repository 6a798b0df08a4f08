"""Episodes end to end: runner -> actors -> LLMPolicy (its aiohttp client) -> mock server."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from actors import configure_logging, disable_logging
from actors._gc import gc_eager
from chaosops.agents.llm import LLMEndpointError, LLMPolicy, check_endpoint
from chaosops.agents.runner import arun_batch
from chaosops.curriculum.generator import scenarios_for_tier
from chaosops.env.models import ActionType, AgentRole, DifficultyTier, FailureType
from chaosops.env.world_sim import Scenario

from ...conftest import StartMock
from .helpers import wait_for

MODEL = "chaosops-mock"
SECRET = "sk-test-SECRET123"


def _roles(policy: LLMPolicy) -> dict[AgentRole, LLMPolicy]:
    return dict.fromkeys(AgentRole, policy)


@pytest.mark.parametrize("use_tools", [False, True])
@pytest.mark.asyncio
async def test_easy_incidents_resolve(start_mock: StartMock, use_tools: bool) -> None:
    mock = await start_mock(latency="uniform:1-5ms", answer_style="mixed")
    scenarios = scenarios_for_tier(DifficultyTier.EASY, episodes_per_type=2)
    async with LLMPolicy(
        MODEL, base_url=mock.base_url, use_tools=use_tools, max_in_flight=4
    ) as policy:
        results = await arun_batch(scenarios, _roles(policy), concurrency=8, turn_timeout=5.0)
    assert len(results) == 8
    for result in results:
        assert result.status == "ok" and result.resolved, result.scenario
        assert result.wrong_fixes == 0 and result.timeouts == 0 and result.errors == 0
        for step in result.steps:
            info = step.info
            assert info["prompt"][0]["role"] == "system"
            assert info["completion"] and info["latency_ms"] > 0
            assert info["usage"]["completion_tokens"] > 0
    assert mock.stats["peak_in_flight"] <= 4


@pytest.mark.asyncio
async def test_deadline_gives_timed_out_steps_and_drops_requests(start_mock: StartMock) -> None:
    mock = await start_mock(latency="60s")
    scenarios = [Scenario.from_type(FailureType.DB_DEADLOCK, seed=s, max_steps=2) for s in range(4)]
    # long enough for every request to reach the server (in this same event
    # loop) first: 50 ms was not, on a loaded machine
    deadline = 1.0
    async with LLMPolicy(MODEL, base_url=mock.base_url) as policy:
        started = anyio.current_time()
        results = await arun_batch(scenarios, _roles(policy), concurrency=4, turn_timeout=deadline)
        wall = anyio.current_time() - started
        steps = [step for result in results for step in result.steps]
        assert len(steps) == 4 * 2
        assert all(s.timed_out and s.action.action_type == ActionType.NOOP for s in steps)
        assert all(s.latency_s < deadline + 10 for s in steps)  # far below the 60 s answer
        assert wall < 30  # nobody waited for the 60 s answers
        # every request was abandoned by the client, and the server saw it
        assert await wait_for(lambda: mock.stats["disconnected"] == len(steps)), mock.stats
    assert mock.stats["completed"] == 0 and mock.stats["requests"] == len(steps)


# The standard loop's: uvloop's transports are C objects, and a request cancelled
# there leaves no cyclic garbage for the collector to find (this test ran on the
# standard loop only before the async tests ran on both).
@pytest.mark.asyncio(loop_factories=["asyncio"])
async def test_requests_cancelled_at_the_deadline_end_the_eager_collector_mode(
    start_mock: StartMock,
) -> None:
    # A request cancelled at its deadline leaves cyclic garbage (the closed
    # connection, the cancelled attempt's frames): freezing young survivors
    # would keep it until the batch ends, so the batch stops doing so.
    mock = await start_mock(latency="60s")
    scenarios = [Scenario.from_type(FailureType.DB_DEADLOCK, seed=s, max_steps=1) for s in range(2)]
    modes: list[bool] = []
    async with LLMPolicy(MODEL, base_url=mock.base_url) as policy:

        async def watched(observation: Any, role: Any) -> Any:
            gc.collect(0)  # the previous turn's cancelled request is garbage by now
            modes.append(gc_eager())
            return await policy(observation, role)

        # a deadline long enough for the request to be sent and in flight when
        # it is cancelled (50 ms was not always, on a loaded machine)
        results = await arun_batch(
            scenarios, dict.fromkeys(AgentRole, watched), concurrency=1, turn_timeout=1.0,
            gc_freeze=True,
        )  # fmt: skip
    assert all(step.timed_out for result in results for step in result.steps)
    assert modes[0] is True and modes[-1] is False, modes


@pytest.mark.asyncio
async def test_unparseable_answers_become_noop(start_mock: StartMock) -> None:
    mock = await start_mock(rate_garbage=1.0)
    scenario = Scenario.from_type(FailureType.MEMORY_LEAK, seed=0, max_steps=3)
    with capture_logs() as logs:
        async with LLMPolicy(MODEL, base_url=mock.base_url) as policy:
            (result,) = await arun_batch([scenario], _roles(policy), turn_timeout=5.0)
    assert not result.resolved and result.errors == 0
    assert all(s.action.action_type == ActionType.NOOP for s in result.steps)
    assert all(s.info["parse_error"] for s in result.steps)
    parse_errors = [e for e in logs if e["event"] == "parse_error"]
    assert len(parse_errors) == len(result.steps) == 3  # max_steps counts every role's step


@pytest.mark.asyncio
async def test_request_failures_are_step_errors(start_mock: StartMock) -> None:
    mock = await start_mock(rate_500=1.0)
    scenario = Scenario.from_type(FailureType.MEMORY_LEAK, seed=0, max_steps=1)
    async with LLMPolicy(MODEL, base_url=mock.base_url, retries=1, backoff_base=0.001) as p:
        (result,) = await arun_batch([scenario], _roles(p), turn_timeout=5.0)
    assert result.status == "ok" and result.errors == len(result.steps) == 1
    assert all(s.error and s.error.startswith("LLMRequestError:") for s in result.steps)


@pytest.mark.asyncio
async def test_api_key_leaves_no_trace(
    start_mock: StartMock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key (from OPENAI_API_KEY) authenticates, and appears nowhere we write."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    # scripted 500s (a rate could give none in a short run), unreadable answers
    mock = await start_mock(api_key=SECRET, rate_garbage=0.5, first_statuses=[500, 500], seed=7)
    await check_endpoint(mock.base_url, MODEL)
    log_path = tmp_path / "run.jsonl"
    configure_logging(log_path, level="debug")
    texts: list[str] = []
    try:
        policy = LLMPolicy(MODEL, base_url=mock.base_url, retries=0, logprobs=True)
        texts.append(repr(policy))
        scenarios = scenarios_for_tier(DifficultyTier.HARD, episodes_per_type=1)
        results = await arun_batch(scenarios, _roles(policy), concurrency=4, turn_timeout=5.0)
        await policy.aclose()
        for exc_call in (
            check_endpoint(mock.base_url, "other-model"),
            check_endpoint("http://127.0.0.1:9/v1", MODEL),
        ):
            with pytest.raises(LLMEndpointError) as raised:  # each call must fail
                await exc_call
            texts.append(f"{type(raised.value).__name__}: {raised.value}")
    finally:
        disable_logging()
    assert any(step.error for r in results for step in r.steps)  # failures happened
    assert any(step.info.get("parse_error") for r in results for step in r.steps)
    assert any(r.resolved for r in results)  # the key worked
    for result in results:
        texts.append(repr(result))
        for step in result.steps:
            texts.append(json.dumps(step.info, default=str))
            texts.append(str(step.error))
    texts.append(log_path.read_text())
    assert "turn" in texts[-1] and "parse_error" in texts[-1]
    for text in texts:
        assert SECRET not in text and "SECRET123" not in text
