"""The mock server: routes, latency specs, faults, and the heuristic it plays."""

from __future__ import annotations

import random

import httpx2
import pytest

from chaosops.agents.llm import LLMPolicy
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import DifficultyTier, FailureType
from chaosops.env.world_sim import Scenario
from chaosops.mock_llm import (
    MockLLMConfig,
    create_app,
    main,
    parse_latency,
    run_mock_llm_in_thread,
)

from ..conftest import StartMock


@pytest.mark.parametrize(
    ("spec", "low", "high", "mean"),
    [
        ("50ms", 0.05, 0.05, 0.05),
        ("0.05s", 0.05, 0.05, 0.05),
        ("50", 0.05, 0.05, 0.05),
        ("0", 0.0, 0.0, 0.0),
        ("uniform:20-80ms", 0.02, 0.08, 0.05),
        ("uniform:0.1s-0.2s", 0.1, 0.2, 0.15),
        ("normal:50,10ms", 0.0, 1.0, 0.05),
        ("exp:5ms", 0.0, 10.0, 0.005),
    ],
)
def test_latency_specs(spec: str, low: float, high: float, mean: float) -> None:
    sample = parse_latency(spec)
    rng = random.Random(0)
    values = [sample(rng) for _ in range(2000)]
    assert all(low <= v <= high for v in values)
    # the distribution's own mean, within 10% (2,000 draws): a parser that
    # returned a constant 0, or the wrong unit, fails here
    assert abs(sum(values) / len(values) - mean) <= 0.1 * mean


@pytest.mark.parametrize("spec", ["fast", "uniform:80-20ms", "normal:50ms", "-5ms", "50min"])
def test_bad_latency_specs(spec: str) -> None:
    with pytest.raises(ValueError, match="latency"):
        MockLLMConfig(latency=spec)


def test_bad_cli_option_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--latency", "soon"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "latency" in err


@pytest.mark.asyncio
async def test_models_and_errors(start_mock: StartMock) -> None:
    mock = await start_mock(model="m1", api_key="sk-mock-key")
    headers = {"Authorization": "Bearer sk-mock-key"}
    async with httpx2.AsyncClient(base_url=mock.base_url) as client:
        models = (await client.get("/models", headers=headers)).json()
        assert [m["id"] for m in models["data"]] == ["m1"]
        assert (await client.get("/models")).status_code == 401
        bad = await client.post("/chat/completions", json={"model": "m1"}, headers=headers)
        assert bad.status_code == 400
        missing = await client.post(
            "/chat/completions", json={"model": "m2", "messages": []}, headers=headers
        )
        assert missing.status_code == 404 and "m2" in missing.text
        assert "sk-mock-key" not in missing.text


@pytest.mark.parametrize("use_tools", [False, True])
@pytest.mark.asyncio
async def test_mock_resolves_every_failure(start_mock: StartMock, use_tools: bool) -> None:
    """Driving the environment directly through the real client and the mock."""
    mock = await start_mock(answer_style="mixed")
    async with LLMPolicy("chaosops-mock", base_url=mock.base_url, use_tools=use_tools) as policy:
        steps = 0
        for failure in FailureType:
            env = ChaosOpsEnvironment()
            obs = env.reset(
                scenario=Scenario.from_type(failure, seed=3, difficulty=DifficultyTier.HARD)
            )
            while not obs.done:
                obs = env.step(await policy(obs, obs.turn_role))
            assert env.state.resolved, failure
            assert env.state.wrong_fixes == 0, failure
            assert env.state.step_count <= 3, failure
            steps += env.state.step_count
    assert mock.stats["tool_calls"] == (steps if use_tools else 0)


@pytest.mark.asyncio
async def test_stats_over_http(start_mock: StartMock) -> None:
    mock = await start_mock()
    stats = await mock.http_stats()
    assert stats["requests"] == 0 and stats["peak_in_flight"] == 0


def test_run_in_thread_for_sync_code() -> None:
    with run_mock_llm_in_thread(MockLLMConfig(port=0, model="m")) as handle:
        response = httpx2.get(f"{handle.base_url}/models")
        assert response.json()["data"][0]["id"] == "m"
        assert handle.stats()["requests"] == 0
        assert handle.base_url.startswith("http://127.0.0.1:")


@pytest.mark.asyncio
async def test_a_client_gone_before_its_body_is_read_is_counted_not_raised() -> None:
    """A request cancelled at its turn's deadline may be gone before the mock reads
    its body (a busy machine, short deadlines): counted as disconnected (499), not
    an ASGI exception with a traceback on the mock's stderr."""
    app = create_app(MockLLMConfig())
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")],
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
    }
    await app(scope, receive, send)
    stats = app.state.mock.stats
    assert stats.disconnected == 1 and stats.in_flight == 0
    assert stats.by_status == {"499": 1}
