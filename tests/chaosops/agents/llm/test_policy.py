"""LLMPolicy (its aiohttp client) against the mock server in this event loop."""

from __future__ import annotations

import dataclasses
import json
import re
import socket
from functools import partial
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from chaosops.agents.llm import (
    LLMDeadlineError,
    LLMEndpointError,
    LLMPolicy,
    LLMRequestError,
    check_endpoint,
)
from chaosops.env.models import ActionType, ChaosOpsObservation

from ...conftest import StartMock
from .helpers import FakeTurn, wait_for

MODEL = "chaosops-mock"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.asyncio
async def test_answer_is_parsed_and_annotated(
    start_mock: StartMock, fake_turn: FakeTurn, observation: ChaosOpsObservation
) -> None:
    mock = await start_mock(answer_style="chatter")
    async with LLMPolicy(MODEL, base_url=mock.base_url) as policy:
        action = await policy(observation, "sre")
    assert (action.action_type, action.target) == (ActionType.RESTART, "db")
    info = fake_turn.info
    assert info["prompt"][0]["role"] == "system" and "## METRICS" in info["prompt"][1]["content"]
    assert '"restart"' in info["completion"]
    assert info["latency_ms"] > 0 and info["attempts"] == 1
    assert info["usage"]["completion_tokens"] > 0 and info["usage"]["prompt_tokens"] > 0
    assert "parse_error" not in info and "logprobs" not in info


@pytest.mark.parametrize(
    "extra_body", [{"return_tokens_as_token_ids": True}, {"return_token_ids": True}]
)
@pytest.mark.asyncio
async def test_token_ids_and_logprobs_when_returned(
    start_mock: StartMock,
    fake_turn: FakeTurn,
    observation: ChaosOpsObservation,
    extra_body: dict[str, bool],
) -> None:
    mock = await start_mock()
    async with LLMPolicy(
        MODEL, base_url=mock.base_url, logprobs=True, extra_body=extra_body
    ) as policy:
        await policy(observation, "sre")
    info = fake_turn.info
    assert len(info["logprobs"]) == len(info["token_ids"]) == info["usage"]["completion_tokens"]
    assert all(isinstance(t, int) for t in info["token_ids"])
    assert all(lp <= 0 for lp in info["logprobs"])


@pytest.mark.asyncio
async def test_tool_call_answer(
    start_mock: StartMock, fake_turn: FakeTurn, observation: ChaosOpsObservation
) -> None:
    mock = await start_mock()
    async with LLMPolicy(MODEL, base_url=mock.base_url, use_tools=True) as policy:
        action = await policy(observation, "sre")
    assert (action.action_type, action.target) == (ActionType.RESTART, "db")
    assert fake_turn.info["tool_calls"][0]["name"] == "take_action"
    assert mock.stats["tool_calls"] == 1


@pytest.mark.asyncio
async def test_429_is_retried_honouring_retry_after(
    start_mock: StartMock, fake_turn: FakeTurn, observation: ChaosOpsObservation
) -> None:
    mock = await start_mock(first_statuses=[429, 429], retry_after_s=0.1)
    policy = LLMPolicy(MODEL, base_url=mock.base_url, backoff_base=0.001)
    started = anyio.current_time()
    action = await policy(observation, "sre")
    elapsed = anyio.current_time() - started
    await policy.aclose()
    assert action.action_type == ActionType.RESTART
    assert fake_turn.info["attempts"] == 3
    assert elapsed >= 0.2  # two Retry-After waits of 100 ms
    assert mock.stats["rate_limited"] == 2 and mock.stats["by_status"]["200"] == 1


@pytest.mark.asyncio
async def test_500_is_retried_then_gives_up(
    start_mock: StartMock, observation: ChaosOpsObservation
) -> None:
    mock = await start_mock(first_statuses=[500, 500, 500, 500])
    async with LLMPolicy(MODEL, base_url=mock.base_url, retries=1, backoff_base=0.001) as p:
        with pytest.raises(LLMRequestError, match=r"2 attempts, last: HTTP 500"):
            await p(observation, "sre")
        # the budget is per call: the next call retries again and gets through
        p.settings = dataclasses.replace(p.settings, retries=2)
        assert (await p(observation, "sre")).action_type == ActionType.RESTART
    assert mock.stats["server_errors"] == 4


@pytest.mark.asyncio
async def test_client_errors_are_not_retried(
    start_mock: StartMock, observation: ChaosOpsObservation
) -> None:
    mock = await start_mock()
    async with LLMPolicy("no-such-model", base_url=mock.base_url) as policy:
        with pytest.raises(LLMRequestError, match="HTTP 404"):
            await policy(observation, "sre")
    assert mock.stats["requests"] == 1


@pytest.mark.asyncio
async def test_dropped_connections_are_retried(observation: ChaosOpsObservation) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    async with LLMPolicy(MODEL, base_url=url, retries=2, backoff_base=0.001) as policy:
        with pytest.raises(LLMRequestError, match="3 attempts, last: connection failed"):
            await policy(observation, "sre")


@pytest.mark.asyncio
async def test_unparseable_answer_is_noop_with_parse_error(
    start_mock: StartMock, fake_turn: FakeTurn, observation: ChaosOpsObservation
) -> None:
    mock = await start_mock(rate_garbage=1.0)
    with capture_logs() as logs:
        async with LLMPolicy(MODEL, base_url=mock.base_url) as policy:
            actions = [await policy(observation, "sre") for _ in range(5)]
    assert all(a.action_type == ActionType.NOOP for a in actions)
    assert all(a.role.value == "sre" for a in actions)
    errors = [e for e in logs if e["event"] == "parse_error"]
    assert len(errors) == 5
    assert all(e["log_level"] == "warning" and e["role"] == "sre" for e in errors)
    assert all(0 < len(e["raw"]) <= 500 for e in errors)
    assert fake_turn.info["parse_error"]
    assert fake_turn.info["completion"] == errors[-1]["raw"]


@pytest.mark.asyncio
async def test_long_garbage_is_cut_in_the_log(
    start_mock: StartMock, observation: ChaosOpsObservation, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("chaosops.mock_llm.server.GARBAGE", ("blah " * 400,))
    mock = await start_mock(rate_garbage=1.0)
    with capture_logs() as logs:
        async with LLMPolicy(MODEL, base_url=mock.base_url) as policy:
            await policy(observation, "dev")
    (event,) = [e for e in logs if e["event"] == "parse_error"]
    assert len(event["raw"]) == 500


@pytest.mark.asyncio
async def test_deadline_bounds_the_request(
    start_mock: StartMock, fake_turn: FakeTurn, observation: ChaosOpsObservation
) -> None:
    """No runtime around: the policy itself stops at the turn's deadline."""
    mock = await start_mock(latency="60s")
    async with LLMPolicy(MODEL, base_url=mock.base_url, backoff_base=0.001) as policy:
        # long enough for the request to reach the server first (100 ms was
        # not always, on a loaded machine)
        fake_turn.deadline = anyio.current_time() + 1.0
        started = anyio.current_time()
        with pytest.raises(LLMDeadlineError, match="deadline"):
            await policy(observation, "sre")
        assert anyio.current_time() - started < 1.0 + 10  # far below the 60 s answer
        assert await wait_for(lambda: mock.stats["disconnected"] == 1), mock.stats
    assert mock.stats["requests"] == 1  # no retry that could not finish in time


@pytest.mark.asyncio
async def test_retry_after_beyond_the_deadline_gives_up_at_once(
    start_mock: StartMock, fake_turn: FakeTurn, observation: ChaosOpsObservation
) -> None:
    mock = await start_mock(first_statuses=[429], retry_after_s=60.0)
    async with LLMPolicy(MODEL, base_url=mock.base_url) as policy:
        fake_turn.deadline = anyio.current_time() + 20.0
        started = anyio.current_time()
        with pytest.raises(LLMDeadlineError, match="429"):
            await policy(observation, "sre")
        assert anyio.current_time() - started < 10  # waited for neither


@pytest.mark.asyncio
async def test_cancellation_drops_the_http_request(
    start_mock: StartMock, observation: ChaosOpsObservation
) -> None:
    """The runtime cancels the policy at the deadline: the connection goes with it."""
    mock = await start_mock(latency="60s")
    async with LLMPolicy(MODEL, base_url=mock.base_url) as policy:
        async with anyio.create_task_group() as tg:
            tg.start_soon(policy, observation, "sre")
            # cancelled once the server has the request (a fixed 50 ms could
            # come before it was sent, on a loaded machine)
            assert await wait_for(lambda: mock.stats["in_flight"] == 1), mock.stats
            started = anyio.current_time()
            tg.cancel_scope.cancel()
        assert anyio.current_time() - started < 10  # far below the 60 s answer
        ok = await wait_for(lambda: mock.stats["disconnected"] == 1)
        assert ok, mock.stats


@pytest.mark.parametrize("limit", [1, 3])
@pytest.mark.asyncio
async def test_max_in_flight_bounds_the_server_load(
    start_mock: StartMock, observation: ChaosOpsObservation, limit: int
) -> None:
    # each answer takes 0.5 s: the requests queued behind the limit are all
    # sent within it (milliseconds, or a few hundred on a loaded machine), so
    # the server sees exactly ``limit`` at once, never more
    mock = await start_mock(latency="500ms")
    async with LLMPolicy(MODEL, base_url=mock.base_url, max_in_flight=limit) as policy:
        async with anyio.create_task_group() as tg:
            for _ in range(limit + 1):
                tg.start_soon(policy, observation, "sre")
    assert mock.stats["requests"] == limit + 1
    assert mock.stats["peak_in_flight"] == limit


@pytest.mark.asyncio
async def test_concurrency_reaches_the_server_when_allowed(
    start_mock: StartMock, observation: ChaosOpsObservation
) -> None:
    # all 40 at the server at once: each is answered only after 3 s, ten times
    # what a loaded machine may take to send them all (a few hundred ms)
    mock = await start_mock(latency="3s")
    async with LLMPolicy(MODEL, base_url=mock.base_url, max_in_flight=100) as policy:
        async with anyio.create_task_group() as tg:
            for _ in range(40):
                tg.start_soon(policy, observation, "sre")
    assert mock.stats["peak_in_flight"] == 40


@pytest.mark.asyncio
async def test_check_endpoint_ok_and_unknown_model(start_mock: StartMock) -> None:
    mock = await start_mock(model="served-a")
    await check_endpoint(mock.base_url, "served-a")
    with pytest.raises(LLMEndpointError) as info:
        await check_endpoint(mock.base_url, "gpt-nope")
    message = str(info.value)
    assert "'gpt-nope'" in message and "served-a" in message and mock.base_url in message
    assert "\n" not in message


@pytest.mark.asyncio
async def test_check_endpoint_unreachable() -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    with pytest.raises(LLMEndpointError) as info:
        await check_endpoint(url, MODEL, timeout=2)
    message = str(info.value)
    assert url in message and "cannot reach" in message and "\n" not in message
    assert info.value.__cause__ is None


@pytest.mark.asyncio
async def test_check_endpoint_wrong_base_url(start_mock: StartMock) -> None:
    mock = await start_mock()
    root = mock.base_url.removesuffix("/v1")
    with pytest.raises(LLMEndpointError, match="/v1"):
        await check_endpoint(root, MODEL)


@pytest.mark.asyncio
async def test_check_endpoint_hides_credentials_in_url(start_mock: StartMock) -> None:
    mock = await start_mock(api_key="right-key")
    url = mock.base_url.replace("http://", "http://user:hunter2@")
    with pytest.raises(LLMEndpointError) as info:
        await check_endpoint(url, MODEL, api_key="wrong-key-XYZ")
    message = str(info.value)
    assert "rejected the API key" in message
    assert "hunter2" not in message and "wrong-key-XYZ" not in message


@pytest.mark.parametrize("url", ["localhost:8000/v1", "ftp://host/v1", "", "http://256.1.1.1/v1"])
@pytest.mark.asyncio
async def test_check_endpoint_invalid_url(url: str) -> None:
    with pytest.raises(LLMEndpointError, match="invalid LLM endpoint URL"):
        await check_endpoint(url, MODEL)


async def _serve_body(
    start_mock_tg: Any, body: bytes, content_type: str, path: str = "/v1/chat/completions"
) -> str:
    """A server whose chat completions (or ``path``) are ``body`` as it is, for broken answers."""
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    from chaosops.mock_llm import MockLLMConfig, serve

    async def answer(request: Any) -> Response:
        return Response(body, media_type=content_type)

    app = Starlette(routes=[Route(path, answer, methods=["GET", "POST"])])
    port = await start_mock_tg.start(partial(serve, MockLLMConfig(port=0), app=app))
    return f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize(
    ("body", "content_type", "needle"),
    [
        (b"<html><body>Bad gateway page</body></html>", "text/html", "no chat completion: '<html>"),
        (b"{not json", "application/json", "JSON that does not decode"),
        (b"", "text/plain", "no chat completion: an empty body"),
    ],
    ids=["html", "broken-json", "empty"],
)
@pytest.mark.asyncio
async def test_a_200_that_is_not_a_completion_is_named(
    observation: ChaosOpsObservation, body: bytes, content_type: str, needle: str
) -> None:
    async with anyio.create_task_group() as tg:
        url = await _serve_body(tg, body, content_type)
        async with LLMPolicy(MODEL, base_url=url, retries=0) as policy:
            with pytest.raises(LLMRequestError, match=re.escape(needle)) as info:
                await policy(observation, "sre")
        assert "\n" not in str(info.value) and url in str(info.value)
        tg.cancel_scope.cancel()


@pytest.mark.asyncio
async def test_no_text_is_recorded_as_a_null_completion_and_the_answer_s_facts_kept(
    fake_turn: FakeTurn, observation: ChaosOpsObservation
) -> None:
    answer = {
        "id": "x", "object": "chat.completion", "created": 0, "model": "served-model",
        "choices": [{"index": 0, "finish_reason": "length",
                     "message": {"role": "assistant", "content": None}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 0, "total_tokens": 5},
    }  # fmt: skip
    async with anyio.create_task_group() as tg:
        url = await _serve_body(tg, json.dumps(answer).encode(), "application/json")
        async with LLMPolicy(MODEL, base_url=url) as policy:
            action = await policy(observation, "sre")
        tg.cancel_scope.cancel()
    info = fake_turn.info
    assert action.action_type == ActionType.NOOP
    assert (
        info["parse_error"] == "answer cut at the token limit (finish_reason length): empty answer"
    )
    assert "completion" in info and info["completion"] is None
    assert info["model"] == "served-model" and info["finish_reason"] == "length"
    assert info["usage"] == {"prompt_tokens": 5, "completion_tokens": 0, "total_tokens": 5}


@pytest.mark.asyncio
async def test_check_endpoint_port_out_of_range() -> None:
    for url in ("http://127.0.0.1:99999/v1", "http://127.0.0.1:65536/v1"):
        with pytest.raises(LLMEndpointError, match="invalid LLM endpoint URL"):
            await check_endpoint(url, MODEL)


@pytest.mark.asyncio
async def test_failures_in_a_row_count_calls_that_failed_for_good(
    start_mock: StartMock, fake_turn: FakeTurn, observation: ChaosOpsObservation
) -> None:
    mock = await start_mock(rate_500=1.0)
    async with LLMPolicy(MODEL, base_url=mock.base_url, retries=0) as policy:
        assert policy.failures_in_a_row == 0 and policy.last_failure is None
        for count in (1, 2):
            with pytest.raises(LLMRequestError):
                await policy(observation, "sre")
            assert policy.failures_in_a_row == count
        assert policy.last_failure is not None and "HTTP 500" in policy.last_failure
        # a deadline that passed before anything was sent says nothing of the endpoint
        fake_turn.deadline = anyio.current_time() - 1.0
        with pytest.raises(LLMDeadlineError, match="before the request"):
            await policy(observation, "sre")
        assert policy.failures_in_a_row == 2
        # the endpoint answers again: one answer resets the count
        fake_turn.deadline = None
        mock.config.rate_500 = 0.0
        assert (await policy(observation, "sre")).action_type == ActionType.RESTART
        assert policy.failures_in_a_row == 0


def test_extra_body_cannot_replace_what_the_policy_sends_and_records() -> None:
    for body in ({"messages": []}, {"model": "other", "stream": True}):
        with pytest.raises(ValueError, match="extra_body cannot set 'm"):
            LLMPolicy(MODEL, extra_body=body)
    assert LLMPolicy(MODEL, extra_body={"top_k": 5}).settings.extra_body == {"top_k": 5}


def _completion(message: dict[str, Any], **extra: Any) -> bytes:
    choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", **message}}
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [choice], **extra}  # fmt: skip
    return json.dumps(body).encode()


_RESTART = '{"action_type": "restart", "target": "db", "args": {}}'
_RESTART_TEXT = '{"action_type":"restart","target":"db","args":{}}'  # as orjson writes it


@pytest.mark.parametrize(
    ("body", "action_type", "parse_error", "facts"),
    [
        # Content parts (some servers send them): their text is the answer.
        (_completion({"content": [{"type": "text", "text": _RESTART}]}), ActionType.RESTART,
         None, {"completion": _RESTART}),
        (_completion({"content": 42}), ActionType.NOOP,
         "the message content is int, not text", {"completion": None}),
        (json.dumps({"id": "x", "model": "m", "choices": {"0": "x"}}).encode(), ActionType.NOOP,
         "empty answer", {"completion": None}),
        (_completion({"content": None, "tool_calls": [{"id": "c", "type": "function",
                                                        "function": "take_action"}]}),
         ActionType.NOOP, "tool call: no action_type in the JSON object", {}),
        # Arguments sent as an object, not as its JSON text: recorded as text all the same.
        (_completion({"content": None, "tool_calls": [{"id": "c", "type": "function",
                      "function": {"name": "take_action", "arguments": json.loads(_RESTART)}}]}),
         ActionType.RESTART, None,
         {"completion": _RESTART_TEXT,
          "tool_calls": [{"name": "take_action", "arguments": _RESTART_TEXT}]}),
        # Fields of the wrong type are left out, or null: the records' types hold.
        (_completion({"content": _RESTART},
                     usage={"prompt_tokens": "ten", "completion_tokens": 5, "total_tokens": 2**70}),
         ActionType.RESTART, None,
         {"usage": {"prompt_tokens": None, "completion_tokens": 5, "total_tokens": None}}),
        (_completion({"content": _RESTART}, usage=["x"]), ActionType.RESTART, None,
         {"usage": {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None}}),
    ],
    ids=["content-parts", "content-int", "choices-dict", "tool-function-str",
         "tool-arguments-object", "usage-types", "usage-list"],
)  # fmt: skip
@pytest.mark.asyncio
async def test_an_answer_of_an_odd_shape_costs_its_turn_not_the_policy(
    fake_turn: FakeTurn,
    observation: ChaosOpsObservation,
    body: bytes,
    action_type: ActionType,
    parse_error: str | None,
    facts: dict[str, Any],
) -> None:
    # The client builds responses without validating them: whatever shape the
    # server sent, the turn plays an action (noop and parse_error when none
    # can be read), and what the trajectory records has the promised types.
    async with anyio.create_task_group() as tg:
        url = await _serve_body(tg, body, "application/json")
        async with LLMPolicy(MODEL, base_url=url, retries=0) as policy:
            action = await policy(observation, "sre")
        tg.cancel_scope.cancel()
    info = fake_turn.info
    assert action.action_type == action_type
    assert info.get("parse_error") == parse_error
    assert {key: info.get(key) for key in facts} == facts


@pytest.mark.parametrize(
    ("logprobs", "token_ids", "kept"),
    [
        ({"content": [1, 2]}, ["a", None], {}),
        ({"content": [{"token": "a", "logprob": "x"}]}, [1, 2],
         {"token_ids": [1, 2], "tokens": ["a"]}),
        ({"content": [{"token": "a", "logprob": -0.5}]}, [1, -3],
         {"logprobs": [-0.5], "tokens": ["a"]}),
    ],
)  # fmt: skip
@pytest.mark.asyncio
async def test_token_ids_and_logprobs_are_kept_only_with_their_types(
    fake_turn: FakeTurn,
    observation: ChaosOpsObservation,
    logprobs: Any,
    token_ids: Any,
    kept: dict[str, Any],
) -> None:
    choice = {
        "index": 0,
        "finish_reason": "stop",
        "logprobs": logprobs,
        "token_ids": token_ids,
        "message": {"role": "assistant", "content": _RESTART},
    }
    body = json.dumps({"id": "x", "model": "m", "choices": [choice]}).encode()
    async with anyio.create_task_group() as tg:
        url = await _serve_body(tg, body, "application/json")
        async with LLMPolicy(MODEL, base_url=url, retries=0) as policy:
            action = await policy(observation, "sre")
        tg.cancel_scope.cancel()
    assert action.action_type == ActionType.RESTART
    info = fake_turn.info
    assert {k: info[k] for k in ("logprobs", "tokens", "token_ids") if k in info} == kept


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"<html>a web console</html>", "answered GET /models with a body that is not JSON"),
        (b'{"data": null}', "answered GET /models without a model list"),
        (b'{"data": ["chaosops-mock"]}', "answered GET /models without a model list"),
        (b'{"data": [{"id": 5}]}', "answered GET /models without a model list"),
    ],
    ids=["html", "null", "strings", "int-ids"],
)
@pytest.mark.asyncio
async def test_check_endpoint_names_a_models_list_it_cannot_read(body: bytes, needle: str) -> None:
    async with anyio.create_task_group() as tg:
        url = await _serve_body(tg, body, "application/json", path="/v1/models")
        with pytest.raises(LLMEndpointError, match=re.escape(needle)) as info:
            await check_endpoint(url, MODEL)
        tg.cancel_scope.cancel()
    assert "\n" not in str(info.value) and url in str(info.value)


def test_a_base_url_without_its_scheme_is_refused_when_built() -> None:
    with pytest.raises(ValueError, match=r"base_url 'localhost:8000': an http\(s\) URL"):
        LLMPolicy("m", base_url="localhost:8000")
