"""The LLM policy's HTTP side: clients per event loop, one request with its retries
under the turn's deadline, and the endpoint check before a batch.

One owner of time: every request runs under a cancel scope and an HTTP timeout
no longer than the time the turn has left, every backoff sleep is bounded by
it, and a retry that could not start before the deadline is not attempted.
The ``openai`` client's own retries are off (``max_retries=0``): the retry
loop is here so that it can see the deadline.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import random
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.lowlevel
import httpx2
import orjson
from openai import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AsyncOpenAI,
    AuthenticationError,
    DefaultAsyncHttpxClient,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
)
from openai.types.chat import ChatCompletion

from chaosops._urls import shown_url
from chaosops.agents.llm.settings import LLMSettings

NO_KEY = "EMPTY"  # what local servers (vLLM, Ollama, the mock) accept as "no key"
_MAX_RETRY_AFTER_S = 120.0


class LLMEndpointError(RuntimeError):
    """The endpoint cannot serve the run (unreachable, wrong model, bad key): one line."""


class LLMRequestError(RuntimeError):
    """A chat-completions call failed for good (after its retries, or a non-retryable error)."""


class LLMDeadlineError(LLMRequestError):
    """The turn's deadline leaves no time for (another) request."""


class NotSent(Exception):
    """The turn's deadline passed while the request waited for its turn to go out."""


def http_url_with_host(url: str) -> bool:
    """Whether ``url`` has an http(s) scheme and a host (what any base URL needs)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _valid_url(url: str) -> bool:
    # An http(s) URL with a host, that httpx takes, on a port within 0-65535.
    try:
        httpx2.URL(url)
        urlsplit(url).port  # noqa: B018 - raises for a port out of 0-65535
    except (ValueError, httpx2.InvalidURL):
        return False
    return http_url_with_host(url)


def redact(text: str, secret: str | None) -> str:
    if secret and secret != NO_KEY and len(secret) >= 4:
        text = text.replace(secret, "***")
    return text


def _loop_key() -> object:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # another anyio backend
        return anyio.lowlevel.current_token()


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds asked by ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date)."""
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@cache
def _ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle takes ~40 ms: do it once per process, and outside the
    # event loop (LLMPolicy's constructor), not inside a turn with a deadline.
    return ssl.create_default_context()


_SAMPLE_COMPLETION: dict[str, Any] = {
    "id": "warm-up",
    "object": "chat.completion",
    "created": 0,
    "model": "warm-up",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "{}"},
            "logprobs": {"content": [{"token": "{", "logprob": 0.0, "top_logprobs": []}]},
        }
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


@cache
def warm_up() -> None:
    """Pay once, at construction, what the openai client otherwise pays in the first
    turn: its lazy imports and pydantic schema builds (~100 ms of blocked loop)."""
    _ssl_context()
    client = AsyncOpenAI(
        api_key=NO_KEY,
        base_url="http://127.0.0.1:9/v1",
        max_retries=0,
        http_client=_http_client(1.0, 1),
    )
    _ = client.chat.completions.with_raw_response
    ChatCompletion.model_validate(_SAMPLE_COMPLETION)


def _http_client(timeout: float, max_connections: int) -> httpx2.AsyncClient:
    return DefaultAsyncHttpxClient(
        verify=_ssl_context(),
        timeout=timeout,
        limits=httpx2.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        ),
    )


_JSON_HEADERS = {"Content-Type": "application/json"}
_SHARD_CONNECTIONS = 16
"""Connections per HTTP client. httpcore's pool scans every connection (with a
``poll`` syscall each) whenever a request is assigned, so one pool of N
connections costs O(N) per request; shards of 16 keep that flat at any
``max_in_flight``."""


@dataclass
class _LoopState:
    key: object
    clients: list[AsyncOpenAI]
    busy: list[int]
    limiter: anyio.CapacityLimiter

    def pick(self) -> int:
        """The least busy shard (called with the limiter held, so one has room)."""
        busy = self.busy
        index = busy.index(min(busy))
        busy[index] += 1
        return index


class ChatClient:
    """Chat-completions requests for one :class:`LLMSettings`: ``max_in_flight``
    at once, spread over HTTP clients of the running event loop."""

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self.key = settings.key or NO_KEY
        self._state: _LoopState | None = None
        self._rng = random.Random()

    def _loop_state(self) -> _LoopState:
        # httpx connection pools and anyio limiters belong to one event loop; a
        # policy reused by a later ``anyio.run`` gets fresh ones.
        key = _loop_key()
        state = self._state
        if state is None or state.key is not key:
            s = self.settings
            shards = -(-s.max_in_flight // _SHARD_CONNECTIONS)
            size = -(-s.max_in_flight // shards)
            clients = [
                AsyncOpenAI(
                    base_url=s.endpoint,
                    api_key=self.key,
                    max_retries=0,
                    timeout=s.request_timeout,
                    http_client=_http_client(s.request_timeout, size),
                )
                for _ in range(shards)
            ]
            limiter = anyio.CapacityLimiter(s.max_in_flight)
            state = self._state = _LoopState(key, clients, [0] * shards, limiter)
        return state

    async def aclose(self) -> None:
        """Close the HTTP clients of the current event loop (a later call opens others)."""
        state, self._state = self._state, None
        if state is not None and state.key is _loop_key():
            for client in state.clients:
                await client.close()

    def error(self, text: str, cls: type[LLMRequestError] = LLMRequestError) -> LLMRequestError:
        """``cls`` naming the model and the endpoint, the key scrubbed out."""
        s = self.settings
        return cls(redact(f"{text} ({s.model} at {shown_url(s.endpoint)})", self.key))

    def _backoff(self, attempt: int) -> float:
        s = self.settings
        cap = min(s.backoff_max, s.backoff_base * 2 ** (attempt - 1))
        return cap * (0.5 + 0.5 * self._rng.random())

    async def complete(
        self, params: dict[str, Any], deadline: float | None, log: Any
    ) -> tuple[ChatCompletion, int]:
        """The completion for the request ``params`` and the attempts it took.

        Raises :class:`NotSent` when the deadline passed before a first request
        could go out, :class:`LLMRequestError` when the call failed for good.
        """
        state = self._loop_state()
        body = orjson.dumps(params)
        attempt = 0
        while True:
            attempt += 1
            async with state.limiter:
                timeout = self._time_left(deadline, attempt)
                completion, failure, hint = await self._attempt(state, body, timeout)
            if completion is not None:
                return completion, attempt
            if attempt > self.settings.retries:
                raise self.error(f"gave up after {attempt} attempts, last: {failure}")
            delay = min(hint, _MAX_RETRY_AFTER_S) if hint is not None else self._backoff(attempt)
            if deadline is not None and anyio.current_time() + delay >= deadline:
                raise self.error(
                    f"{failure}; the turn deadline leaves no time to retry", LLMDeadlineError
                )
            log.info("llm_retry", attempt=attempt, reason=failure, delay_s=round(delay, 3))
            await anyio.sleep(delay)

    def _time_left(self, deadline: float | None, attempt: int) -> float:
        """One attempt's timeout: the request timeout, or less where the deadline is nearer."""
        timeout = self.settings.request_timeout
        if deadline is None:
            return timeout
        timeout = min(timeout, deadline - anyio.current_time())
        if timeout <= 0:
            if attempt == 1:  # no request made: nothing learnt of the endpoint
                raise NotSent
            raise self.error("turn deadline passed before the request", LLMDeadlineError)
        return timeout

    async def _attempt(
        self, state: _LoopState, body: bytes, seconds: float
    ) -> tuple[ChatCompletion | None, str, float | None]:
        """One request: ``(completion, "", None)``, or ``(None, why, retry-after hint)``
        for a failure worth retrying; raises for one that is not."""
        shard = state.pick()
        hint: float | None = None
        failure = ""
        with anyio.move_on_after(seconds) as scope:
            try:
                # The client's generic POST with a body encoded once: the typed
                # ``chat.completions.create`` walks the request through its
                # TypedDict transform and deep-copies it (~2 ms of CPU per call,
                # the bottleneck at hundreds of requests in flight).
                completion = await state.clients[shard].post(
                    "/chat/completions",
                    cast_to=ChatCompletion,
                    content=body,
                    options={"timeout": seconds, "headers": _JSON_HEADERS},
                )
                if not isinstance(completion, ChatCompletion):
                    # HTTP 200 with a body that is not JSON (an HTML page: a
                    # proxy, the wrong URL): the client hands back text
                    raise self.error(
                        "the endpoint answered HTTP 200 with no chat completion: "
                        f"{_shown_body(completion)}"
                    )
                return completion, "", None
            except RateLimitError as exc:
                failure = "HTTP 429 (rate limited)"
                hint = retry_after_seconds(exc.response.headers)
            except APIStatusError as exc:
                if exc.status_code < 500 and exc.status_code != 408:
                    raise self.error(f"HTTP {exc.status_code} from the endpoint") from None
                failure = f"HTTP {exc.status_code}"
            except APITimeoutError:
                failure = "request timed out"
            except APIConnectionError:
                failure = "connection failed"
            except (ValueError, RecursionError) as exc:  # a JSON body that does not decode
                raise self.error(
                    f"the endpoint answered with JSON that does not decode ({exc})"
                ) from None
            finally:
                state.busy[shard] -= 1
        if scope.cancelled_caught:
            failure = f"no answer within {seconds:.3g}s"
        return None, failure, hint


def _shown_body(body: object) -> str:
    """The start of a response body that is not a completion, on one line."""
    text = " ".join(str(body).split())
    return repr(text[:80] + ("..." if len(text) > 80 else "")) if text else "an empty body"


def _served_models(page: Any) -> list[str] | None:
    """The model ids of a ``GET /models`` answer; None when it is not a list
    of objects with string ids (the client does not validate the body)."""
    try:
        data = page.data
        if not isinstance(data, list):
            return None
        ids = [getattr(m, "id", None) for m in data]
    except Exception:
        return None
    return ids if all(isinstance(i, str) for i in ids) else None


async def check_endpoint(
    base_url: str,
    model: str,
    api_key: str | None = None,
    timeout: float = 5.0,  # noqa: ASYNC109 - part of the contract; bounds the whole check
) -> None:
    """Check before a batch that ``base_url`` answers and serves ``model``.

    Raises :class:`LLMEndpointError` with one line naming the URL (unreachable,
    rejected key, no ``/models`` route) or the model and the served ones.
    The key itself never appears in the message.
    """
    key = api_key or os.environ.get("OPENAI_API_KEY") or NO_KEY
    url = shown_url(base_url)
    if not _valid_url(base_url):
        raise LLMEndpointError(
            f"invalid LLM endpoint URL {url!r}: expected http(s)://host[:port]/v1"
        )
    failure: str | None = None
    async with AsyncOpenAI(
        base_url=base_url,
        api_key=key,
        max_retries=0,
        timeout=timeout,
        http_client=_http_client(timeout, 4),
    ) as client:
        with anyio.move_on_after(timeout) as scope:
            try:
                page = await client.models.list()
            except (AuthenticationError, PermissionDeniedError) as exc:
                failure = (
                    f"the LLM endpoint {url} rejected the API key (HTTP {exc.status_code}); "
                    "set OPENAI_API_KEY or pass the right key"
                )
            except NotFoundError:
                failure = (
                    f"the LLM endpoint {url} has no /models route (HTTP 404); "
                    "an OpenAI-compatible base URL usually ends in /v1"
                )
            except APIStatusError as exc:
                failure = f"the LLM endpoint {url} answered HTTP {exc.status_code} to GET /models"
            except APIConnectionError:
                failure = (
                    f"cannot reach the LLM endpoint {url}: connection failed "
                    "(is the server running, and is the URL right?)"
                )
            except (ValueError, RecursionError):  # a 200 whose body is not JSON
                failure = (
                    f"the LLM endpoint {url} answered GET /models with a body that is not "
                    "JSON (a web page? an OpenAI-compatible base URL usually ends in /v1)"
                )
        if scope.cancelled_caught:
            failure = f"the LLM endpoint {url} did not answer GET /models within {timeout:g}s"
        if failure is None:
            served = _served_models(page)
            if served is None:
                failure = (
                    f"the LLM endpoint {url} answered GET /models without a model list "
                    '(expected {"data": [{"id": "..."}, ...]})'
                )
    if failure is not None:
        raise LLMEndpointError(redact(failure, key))
    assert served is not None
    if model not in served:
        listed = ", ".join(served[:20]) + (
            f", ... ({len(served)} in all)" if len(served) > 20 else ""
        )
        raise LLMEndpointError(
            redact(f"model {model!r} is not served by {url}; served: {listed or 'none'}", key)
        )
