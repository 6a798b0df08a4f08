"""The LLM policy's HTTP side: an aiohttp session per event loop, one request
with its retries under the turn's deadline, and the endpoint check before a batch.

One owner of time: every request runs under a cancel scope no longer than the
time the turn has left, every backoff sleep is bounded by it, and a retry that
could not start before the deadline is not attempted.

Why aiohttp and not the ``openai`` SDK: the SDK (on httpx) cost ~2 ms of CPU a
request (its request pipeline and response models), several times the rest of
a turn; a POST of a body encoded once and a JSON body decoded once with orjson
cost a tenth of that. What the SDK gave and this keeps: retries of 429 (with
``Retry-After``), 5xx, 408 and dropped connections, the key as a bearer token
that is never shown, one line for a body that is no completion.
"""

from __future__ import annotations

import asyncio
import email.utils
import ipaddress
import os
import random
import ssl
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import anyio
import anyio.lowlevel
import orjson
import yarl

from chaosops._urls import http_url_with_host, shown_url
from chaosops.agents.llm.completion import NO_KEY, redact
from chaosops.agents.llm.errors import (
    LLMDeadlineError,
    LLMEndpointError,
    LLMRejectedError,
    LLMRequestError,
)
from chaosops.agents.llm.settings import LLMSettings

_MAX_RETRY_AFTER_S = 120.0
ERROR_BODY_CHARS = 300
"""How much of an error response's body a failure quotes."""


class NotSent(Exception):
    """The turn's deadline passed while the request waited for its turn to go out."""


def _valid_url(url: str) -> bool:
    # An http(s) URL with a host, that yarl takes, on a port within 0-65535,
    # whose host, when it is written as an IPv4 address, is one.
    try:
        yarl.URL(url)
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a port out of 0-65535
        host = parts.hostname or ""
        if host.replace(".", "").isdigit():
            ipaddress.ip_address(host)
    except (ValueError, TypeError):
        return False
    return http_url_with_host(url)


def _without_credentials(url: str) -> str:
    """``url`` without a ``user:password@`` part: the key goes as a bearer token."""
    return str(yarl.URL(url).with_user(None))


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


@cache
def warm_up() -> None:
    """Pay once, at construction, what the first turn would otherwise pay inside
    its deadline: the CA bundle."""
    _ssl_context()


def _session(key: str, limit: int, endpoint: str) -> aiohttp.ClientSession:
    """An HTTP session of ``limit`` connections, the key as a bearer token,
    through the proxy the environment names for ``endpoint``, if any."""
    proxy = _env_proxy(endpoint)
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=limit, ssl=_ssl_context()),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        timeout=aiohttp.ClientTimeout(total=None),  # the turn's cancel scope bounds it
        proxy=proxy,
        proxy_auth=None if proxy is None else aiohttp.BasicAuth.from_url(yarl.URL(proxy)),
    )


def _env_proxy(endpoint: str) -> str | None:
    """The proxy HTTP(S)_PROXY names for ``endpoint``, unless NO_PROXY excludes
    it. Read once per session: aiohttp's trust_env asks again on every request,
    in a thread, and adds ~/.netrc logins that clash with the bearer token."""
    parts = urlsplit(endpoint)
    if parts.hostname is None or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


@dataclass
class _LoopState:
    key: object
    session: aiohttp.ClientSession
    limiter: anyio.CapacityLimiter


class ChatClient:
    """Chat-completions requests for one :class:`LLMSettings`: ``max_in_flight``
    at once, spread over HTTP clients of the running event loop."""

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self.key = settings.key or NO_KEY
        self._state: _LoopState | None = None
        self._url = ""  # the endpoint's /chat/completions, set with the session
        self._rng = random.Random()

    def _loop_state(self) -> _LoopState:
        # Connection pools and anyio limiters belong to one event loop; a policy
        # reused by a later ``anyio.run`` gets fresh ones.
        key = _loop_key()
        state = self._state
        if state is None or state.key is not key:
            s = self.settings
            session = _session(self.key, s.max_in_flight, s.endpoint)
            state = self._state = _LoopState(key, session, anyio.CapacityLimiter(s.max_in_flight))
            self._url = f"{_without_credentials(s.endpoint).rstrip('/')}/chat/completions"
        return state

    async def aclose(self) -> None:
        """Close the HTTP session of the current event loop (a later call opens another)."""
        state, self._state = self._state, None
        if state is not None and state.key is _loop_key():
            await state.session.close()

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
    ) -> tuple[dict[str, Any], int]:
        """The completion (the decoded JSON body) for the request ``params`` and
        the attempts it took.

        Raises :class:`NotSent` when the deadline passed before a first request
        could go out, :class:`LLMRequestError` when the call failed for good.
        """
        state = self._loop_state()
        body = orjson.dumps(params)
        fields = tuple(key for key in params if key not in ("model", "messages"))
        attempt = 0
        while True:
            attempt += 1
            async with state.limiter:
                timeout = self._time_left(deadline, attempt)
                completion, failure, hint = await self._attempt(state, body, timeout, fields)
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
        self, state: _LoopState, body: bytes, seconds: float, fields: tuple[str, ...]
    ) -> tuple[dict[str, Any] | None, str, float | None]:
        """One request: ``(completion, "", None)``, or ``(None, why, retry-after hint)``
        for a failure worth retrying; raises for one that is not."""
        failure, hint = "", None
        with anyio.move_on_after(seconds) as scope:
            try:
                async with state.session.post(self._url, data=body) as response:
                    status = response.status
                    if status == 200:
                        data = await _read_bounded(response, self.settings.max_answer_bytes)
                        if data is None:
                            limit = self.settings.max_answer_bytes
                            raise self.error(f"the answer is over {limit} bytes (the limit)")
                        return self._completion(data, response), "", None
                    said = redact(await _error_body(response), self.key)
                    failure = f"HTTP {status}: {said}"
                    if status in (400, 422) or (status == 500 and _names_any(said, fields)):
                        refused = self.error(f"the server refused the request ({failure})")
                        raise LLMRejectedError(str(refused), failure)
                    if status == 429:
                        hint = retry_after_seconds(response.headers)
                    elif status < 500 and status != 408:
                        raise self.error(failure)
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError):
                failure = "connection failed"
        if scope.cancelled_caught:
            failure = f"no answer within {seconds:.3g}s"
        return None, failure, hint

    def _completion(self, data: bytes, response: aiohttp.ClientResponse) -> dict[str, Any]:
        """The decoded completion of a 200, or the error naming what came instead."""
        try:
            completion = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            if "json" in response.content_type:
                raise self.error(
                    f"the endpoint answered with JSON that does not decode ({exc})"
                ) from None
            completion = data.decode("utf-8", "replace")
        if not isinstance(completion, dict):
            # an HTML page (a proxy, the wrong URL), or JSON that is no object
            raise self.error(
                f"the endpoint answered HTTP 200 with no chat completion: {_shown_body(completion)}"
            )
        return completion


async def _read_bounded(response: aiohttp.ClientResponse, limit: int) -> bytes | None:
    """The body, read while it comes; None once it is over ``limit`` bytes (the
    rest is not read: a hostile answer costs no more memory than the limit)."""
    if response.content_length is not None and response.content_length > limit:
        return None
    chunks, size = [], 0
    async for chunk in response.content.iter_chunked(1 << 16):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def _error_body(response: aiohttp.ClientResponse) -> str:
    """The first :data:`ERROR_BODY_CHARS` characters of an error's body, on one line."""
    try:
        data = await _read_bounded(response, 1 << 16)
    except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError):
        data = None
    text = " ".join((data or b"").decode("utf-8", "replace").split())
    return text[:ERROR_BODY_CHARS] or "an empty body"


def _names_any(text: str, fields: tuple[str, ...]) -> bool:
    """Whether a server's error text names one of the request's fields."""
    return any(field in text for field in fields)


def _shown_body(body: object) -> str:
    """The start of a response body that is not a completion, on one line."""
    text = " ".join(str(body).split())
    return repr(text[:80] + ("..." if len(text) > 80 else "")) if text else "an empty body"


def _served_models(page: Any) -> list[str] | None:
    """The model ids of a ``GET /models`` answer; None when it is not a list
    of objects with string ids."""
    data = page.get("data") if isinstance(page, dict) else None
    if not isinstance(data, list):
        return None
    ids = [m.get("id") if isinstance(m, dict) else None for m in data]
    return [str(i) for i in ids] if all(isinstance(i, str) for i in ids) else None


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
    page, failure = None, None
    async with _session(key, 4, base_url) as session:
        with anyio.move_on_after(timeout) as scope:
            try:
                models = f"{_without_credentials(base_url).rstrip('/')}/models"
                async with session.get(models) as response:
                    failure = _models_failure(response.status, url)
                    if failure is None:
                        page = orjson.loads(await response.read())
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError):
                failure = (
                    f"cannot reach the LLM endpoint {url}: connection failed "
                    "(is the server running, and is the URL right?)"
                )
            except orjson.JSONDecodeError:  # a 200 whose body is not JSON
                failure = (
                    f"the LLM endpoint {url} answered GET /models with a body that is not "
                    "JSON (a web page? an OpenAI-compatible base URL usually ends in /v1)"
                )
        if scope.cancelled_caught:
            failure = f"the LLM endpoint {url} did not answer GET /models within {timeout:g}s"
    served = _served_models(page)
    if failure is None and served is None:
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


def _models_failure(status: int, url: str) -> str | None:
    """What a ``GET /models`` status other than 200 says, as one line."""
    if status == 200:
        return None
    if status in (401, 403):
        return (
            f"the LLM endpoint {url} rejected the API key (HTTP {status}); "
            "set OPENAI_API_KEY or pass the right key"
        )
    if status == 404:
        return (
            f"the LLM endpoint {url} has no /models route (HTTP 404); "
            "an OpenAI-compatible base URL usually ends in /v1"
        )
    return f"the LLM endpoint {url} answered HTTP {status} to GET /models"
