"""LLMPolicy's answer formats against the mock server: what a refusal says, what
is retried, and how ``auto`` settles on the strongest format the server takes."""

from __future__ import annotations

import pytest

from chaosops.agents.llm import AnswerRefused, LLMPolicy, LLMRejectedError, LLMRequestError
from chaosops.env.models import ActionType, ChaosOpsObservation

from ...conftest import StartMock
from .helpers import FakeTurn

MODEL = "chaosops-mock"


@pytest.mark.asyncio
async def test_a_400_is_not_retried_and_carries_the_server_s_body(
    start_mock: StartMock, observation: ChaosOpsObservation
) -> None:
    mock = await start_mock(first_statuses=[400])
    async with LLMPolicy(MODEL, base_url=mock.base_url, answer="text") as policy:
        with pytest.raises(LLMRejectedError, match=r"HTTP 400: .*'max_tokens' must be at most"):
            await policy(observation, "sre")
    assert mock.stats["requests"] == 1


@pytest.mark.asyncio
async def test_a_500_naming_a_request_field_is_not_retried(
    start_mock: StartMock, observation: ChaosOpsObservation
) -> None:
    mock = await start_mock(refuse=["json_schema"])
    async with LLMPolicy(MODEL, base_url=mock.base_url, answer="json") as policy:
        with pytest.raises(LLMRejectedError, match=r"HTTP 500: .*response_format") as caught:
            await policy(observation, "sre")
    assert "Input should be 'text' or 'json_object'" in caught.value.reason
    assert len(caught.value.reason) <= len("HTTP 500: ") + 300
    assert mock.stats["requests"] == 1


@pytest.mark.asyncio
async def test_a_500_that_names_no_field_is_retried_and_says_why(
    start_mock: StartMock, observation: ChaosOpsObservation
) -> None:
    mock = await start_mock(first_statuses=[500, 500])
    async with LLMPolicy(MODEL, base_url=mock.base_url, retries=1, backoff_base=0.001) as policy:
        with pytest.raises(LLMRequestError, match=r"last: HTTP 500: .*internal error \(injected\)"):
            await policy(observation, "sre")
    assert mock.stats["requests"] == 2


@pytest.mark.asyncio
async def test_auto_steps_down_at_the_first_refusal_and_remembers(
    start_mock: StartMock, fake_turn: FakeTurn, observation: ChaosOpsObservation
) -> None:
    mock = await start_mock(refuse=["json_schema"])
    async with LLMPolicy(MODEL, base_url=mock.base_url) as policy:
        assert policy.settings.answer == "auto" and policy.settings.negotiated is None
        action = await policy(observation, "sre")
        assert action.action_type is ActionType.RESTART and "parse_error" not in fake_turn.info
        assert policy.settings.negotiated == "json_object"
        await policy(observation, "sre")
    # the refused request, then two in json_object: the refusal is asked once
    assert mock.stats["refused"] == 1 and mock.stats["requests"] == 3


@pytest.mark.asyncio
async def test_negotiate_probes_in_order_and_a_named_format_refused_raises(
    start_mock: StartMock,
) -> None:
    mock = await start_mock(refuse=["json_schema", "tools"])
    async with LLMPolicy(MODEL, base_url=mock.base_url) as policy:
        negotiation = await policy.negotiate()
    assert negotiation.answer == "json_object" and policy.settings.negotiated == "json_object"
    assert [fmt for fmt, _ in negotiation.refused] == ["json"]
    assert "json refused (HTTP 500: " in negotiation.line(MODEL, mock.base_url)
    async with LLMPolicy(MODEL, base_url=mock.base_url, answer="tools") as policy:
        with pytest.raises(AnswerRefused, match=r"refuses tools answers: HTTP 400: .*'tools'"):
            await policy.negotiate()
    plain = await start_mock()
    async with LLMPolicy(MODEL, base_url=plain.base_url) as policy:
        assert (await policy.negotiate()).answer == "json"
