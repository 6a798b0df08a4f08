"""An LLM policy over any OpenAI-compatible chat-completions endpoint.

One owner of time: the runtime's turn deadline (``actors.current_turn().deadline``,
an ``anyio.current_time()`` instant, to within the loop clock's resolution: on
uvloop the time left reads up to a millisecond long). Every request runs under a cancel scope and
an HTTP timeout no longer than the time left, every backoff sleep is bounded by
it, and a retry that could not start before the deadline is not attempted. When
the runtime cancels the turn at its deadline the request in flight is cancelled
with it (the connection is closed). The ``openai`` client's own retries are off
(``max_retries=0``): the retry loop is here so that it can see the deadline.

The API key is held privately: it is not part of the policy's ``repr``, never
logged, never annotated into a turn, and scrubbed from error messages.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import os
import random
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.lowlevel
import httpx2
import orjson
import structlog
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
from chaosops.agents.llm.parse import ACTION_TOOL, parse_action, tool_call_parts
from chaosops.agents.llm.render import build_messages
from chaosops.agents.llm.settings import LLMSettings
from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction, ChaosOpsObservation

__all__ = [
    "DEFAULT_BASE_URL",
    "LLMDeadlineError",
    "LLMEndpointError",
    "LLMPolicy",
    "LLMRequestError",
    "check_endpoint",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""Used when neither ``base_url`` nor ``OPENAI_BASE_URL`` is set."""

_NO_KEY = "EMPTY"  # what local servers (vLLM, Ollama, the mock) accept as "no key"
_RAW_LOG_CHARS = 500
_MAX_RETRY_AFTER_S = 120.0


class LLMEndpointError(RuntimeError):
    """The endpoint cannot serve the run (unreachable, wrong model, bad key): one line."""


class LLMRequestError(RuntimeError):
    """A chat-completions call failed for good (after its retries, or a non-retryable error)."""


class LLMDeadlineError(LLMRequestError):
    """The turn's deadline leaves no time for (another) request."""


OWN_REQUEST_FIELDS = frozenset(("model", "messages", "stream", "n"))
"""Request fields ``extra_body`` may not replace (the CLI's ``--llm-extra-body`` too)."""


class _NotSent(Exception):
    """The turn's deadline passed while the request waited for its turn to go out."""


def _valid_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        httpx2.URL(url)
    except (ValueError, httpx2.InvalidURL):
        return False
    try:
        parts.port  # noqa: B018 - raises for a port out of 0-65535
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _redact(text: str, secret: str | None) -> str:
    if secret and secret != _NO_KEY and len(secret) >= 4:
        text = text.replace(secret, "***")
    return text


def _current_turn() -> Any | None:
    """The runtime's turn context, or None outside a turn (or without ``actors``)."""
    try:
        from actors import current_turn
    except ImportError:
        return None
    try:
        return current_turn()
    except (LookupError, RuntimeError):
        return None


def _logger() -> Any:
    try:
        from actors import get_logger
    except ImportError:
        return structlog.get_logger("chaosops.llm")
    return get_logger()


def _annotate(turn: Any | None, **fields: Any) -> None:
    if turn is not None and hasattr(turn, "annotate"):
        turn.annotate(**fields)


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
def _warm_up() -> None:
    """Pay once, at construction, what the openai client otherwise pays in the first
    turn: its lazy imports and pydantic schema builds (~100 ms of blocked loop)."""
    _ssl_context()
    client = AsyncOpenAI(
        api_key=_NO_KEY,
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


class LLMPolicy:
    """An async policy ``(obs, role) -> ChaosOpsAction`` asking a chat-completions model.

    Args:
        model: the served model name.
        base_url: endpoint root, e.g. ``http://127.0.0.1:8000/v1``; default from
            ``OPENAI_BASE_URL``, else OpenAI's.
        api_key: default from ``OPENAI_API_KEY``; local servers need none.
        temperature, max_tokens, seed: sampling parameters sent with each request.
        max_in_flight: requests this policy keeps in flight at once, whatever the
            number of concurrent episodes (an ``anyio.CapacityLimiter``).
        retries: retries after the first attempt, on 429 (``Retry-After`` honoured),
            5xx, timeouts and dropped connections; other errors are not retried.
        request_timeout: bound on one attempt when the turn has no deadline.
        backoff_base, backoff_max: exponential backoff with jitter, in seconds.
        use_tools: offer the action schema as the ``take_action`` tool.
        tool_choice: sent with the tool (``"auto"``, ``"required"`` or a named choice).
        logprobs, top_logprobs: ask for token logprobs (stored with the turn).
        extra_body: extra request fields, e.g. vLLM's ``{"return_tokens_as_token_ids": True}``.

    A failed call (retries spent, deadline reached, 4xx) raises
    :class:`LLMRequestError`; the runtime then applies the fallback action and
    records the error. An answer that does not parse gives a noop, a
    ``parse_error`` log event and a ``parse_error`` annotation of the turn. Each
    call annotates the turn with ``prompt``, ``completion``, ``latency_ms``,
    ``usage``, ``attempts`` and, when returned, ``model``, ``finish_reason``,
    ``token_ids`` and ``logprobs``.

    ``failures_in_a_row`` counts the calls that failed for good since the last
    answer (any answer resets it), and ``last_failure`` says why the latest one
    did: a caller can stop a batch whose endpoint went away (the CLI's
    ``--llm-max-failures``) instead of playing every turn as a fallback.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 256,
        seed: int | None = None,
        max_in_flight: int = 64,
        retries: int = 4,
        request_timeout: float = 60.0,
        backoff_base: float = 0.2,
        backoff_max: float = 8.0,
        use_tools: bool = False,
        tool_choice: str | dict[str, Any] = "auto",
        logprobs: bool = False,
        top_logprobs: int | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or _NO_KEY
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self.max_in_flight = max_in_flight
        self.retries = retries
        self.request_timeout = request_timeout
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.use_tools = use_tools
        self.tool_choice = tool_choice
        self.logprobs = logprobs
        self.top_logprobs = top_logprobs
        if extra_body and (taken := sorted(OWN_REQUEST_FIELDS & set(extra_body))):
            raise ValueError(
                f"extra_body cannot set {', '.join(map(repr, taken))}: the policy sets "
                "them itself (the prompt it records is the one it sends, and it reads "
                "one whole answer)"
            )
        self.extra_body = dict(extra_body) if extra_body else None
        self._state: _LoopState | None = None
        self._rng = random.Random()
        self.failures_in_a_row = 0
        self.last_failure: str | None = None
        _warm_up()

    @classmethod
    def from_settings(cls, settings: LLMSettings) -> LLMPolicy:
        """The policy for ``settings`` (see :class:`LLMSettings`)."""
        fields = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}
        return cls(**fields)

    def __repr__(self) -> str:
        return (
            f"LLMPolicy(model={self.model!r}, base_url={shown_url(self.base_url)!r}, "
            f"max_in_flight={self.max_in_flight}, retries={self.retries}, "
            f"use_tools={self.use_tools})"
        )

    # -- plumbing -------------------------------------------------------------

    def _loop_state(self) -> _LoopState:
        # httpx connection pools and anyio limiters belong to one event loop; a
        # policy reused by a later ``anyio.run`` gets fresh ones.
        key = _loop_key()
        state = self._state
        if state is None or state.key is not key:
            shards = -(-self.max_in_flight // _SHARD_CONNECTIONS)
            size = -(-self.max_in_flight // shards)
            state = _LoopState(
                key=key,
                clients=[
                    AsyncOpenAI(
                        base_url=self.base_url,
                        api_key=self._api_key,
                        max_retries=0,
                        timeout=self.request_timeout,
                        http_client=_http_client(self.request_timeout, size),
                    )
                    for _ in range(shards)
                ],
                busy=[0] * shards,
                limiter=anyio.CapacityLimiter(self.max_in_flight),
            )
            self._state = state
        return state

    async def aclose(self) -> None:
        """Close the HTTP clients of the current event loop (a later call opens others)."""
        state, self._state = self._state, None
        if state is not None and state.key is _loop_key():
            for client in state.clients:
                await client.close()

    async def __aenter__(self) -> LLMPolicy:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _request_params(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.seed is not None:
            params["seed"] = self.seed
        if self.use_tools:
            params["tools"] = [ACTION_TOOL]
            params["tool_choice"] = self.tool_choice
        if self.logprobs:
            params["logprobs"] = True
            if self.top_logprobs is not None:
                params["top_logprobs"] = self.top_logprobs
        if self.extra_body:
            params.update(self.extra_body)
        return params

    def _backoff(self, attempt: int) -> float:
        cap = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1))
        return cap * (0.5 + 0.5 * self._rng.random())

    def _error(self, text: str, cls: type[LLMRequestError] = LLMRequestError) -> LLMRequestError:
        return cls(_redact(f"{text} ({self.model} at {shown_url(self.base_url)})", self._api_key))

    async def _complete(
        self, messages: list[dict[str, str]], deadline: float | None
    ) -> tuple[Any, int]:
        """The completion and the number of attempts it took."""
        state = self._loop_state()
        body = orjson.dumps(self._request_params(messages))
        attempt = 0
        log = _logger()
        while True:
            attempt += 1
            hint: float | None = None
            async with state.limiter:
                timeout = self.request_timeout
                if deadline is not None:
                    timeout = min(timeout, deadline - anyio.current_time())
                    if timeout <= 0:
                        if attempt == 1:  # no request made: nothing learnt of the endpoint
                            raise _NotSent
                        raise self._error(
                            "turn deadline passed before the request", LLMDeadlineError
                        )
                shard = state.pick()
                with anyio.move_on_after(timeout) as scope:
                    try:
                        # The client's generic POST with a body encoded once: the typed
                        # ``chat.completions.create`` walks the request through its
                        # TypedDict transform and deep-copies it (~2 ms of CPU per call,
                        # the bottleneck at hundreds of requests in flight).
                        completion = await state.clients[shard].post(
                            "/chat/completions",
                            cast_to=ChatCompletion,
                            content=body,
                            options={"timeout": timeout, "headers": _JSON_HEADERS},
                        )
                        if not isinstance(completion, ChatCompletion):
                            # HTTP 200 with a body that is not JSON (an HTML page:
                            # a proxy, the wrong URL): the client hands back text
                            raise self._error(
                                "the endpoint answered HTTP 200 with no chat completion: "
                                f"{_shown_body(completion)}"
                            )
                        return completion, attempt
                    except RateLimitError as exc:
                        failure = "HTTP 429 (rate limited)"
                        hint = retry_after_seconds(exc.response.headers)
                    except APIStatusError as exc:
                        if exc.status_code < 500 and exc.status_code != 408:
                            raise self._error(f"HTTP {exc.status_code} from the endpoint") from None
                        failure = f"HTTP {exc.status_code}"
                    except APITimeoutError:
                        failure = "request timed out"
                    except APIConnectionError:
                        failure = "connection failed"
                    except (ValueError, RecursionError) as exc:  # a JSON body that does not decode
                        raise self._error(
                            f"the endpoint answered with JSON that does not decode ({exc})"
                        ) from None
                    finally:
                        state.busy[shard] -= 1
                if scope.cancelled_caught:
                    failure = f"no answer within {timeout:.3g}s"
            if attempt > self.retries:
                raise self._error(f"gave up after {attempt} attempts, last: {failure}")
            delay = min(hint, _MAX_RETRY_AFTER_S) if hint is not None else self._backoff(attempt)
            if deadline is not None and anyio.current_time() + delay >= deadline:
                raise self._error(
                    f"{failure}; the turn deadline leaves no time to retry", LLMDeadlineError
                )
            log.info("llm_retry", attempt=attempt, reason=failure, delay_s=round(delay, 3))
            await anyio.sleep(delay)

    # -- the policy -----------------------------------------------------------

    async def __call__(self, obs: ChaosOpsObservation, role: AgentRole | str) -> ChaosOpsAction:
        """Ask the model for this role's action on ``obs``."""
        role = AgentRole(getattr(role, "value", role))
        messages = build_messages(obs, role)
        turn = _current_turn()
        deadline = getattr(turn, "deadline", None)
        _annotate(turn, prompt=messages)  # kept even if the turn times out
        started = time.perf_counter()  # not the loop clock: uvloop's counts whole ms
        try:
            completion, attempts = await self._complete(messages, deadline)
        except _NotSent:
            raise self._error("turn deadline passed before the request", LLMDeadlineError) from None
        except LLMRequestError as exc:
            self.failures_in_a_row += 1
            self.last_failure = str(exc)
            raise
        self.failures_in_a_row = 0
        latency_ms = round((time.perf_counter() - started) * 1000.0, 3)

        info: dict[str, Any] = {"latency_ms": latency_ms, "attempts": attempts}
        try:
            text, tool_calls, answer, content_error = _read_answer(completion)
            shape_error = None
        except Exception as exc:  # a body of a shape no server should send: costs the turn
            text, tool_calls, answer, content_error = None, [], {"completion": None}, None
            shape_error = f"the answer has an unexpected shape ({type(exc).__name__}: {exc})"[:200]
        info.update(answer)
        raw = info["completion"]

        action, error = (None, shape_error) if shape_error else parse_action(text, role, tool_calls)
        if action is None and error == "empty answer" and content_error is not None:
            error = content_error
        if action is None:
            info["parse_error"] = error
            _logger().warning(
                "parse_error",
                role=role.value,
                error=error,
                raw=_redact((raw or "")[:_RAW_LOG_CHARS], self._api_key),
            )
            action = ChaosOpsAction(role=role, action_type=ActionType.NOOP)
        _annotate(turn, **info)
        return action


def _read_answer(completion: Any) -> tuple[str | None, list[Any], dict[str, Any], str | None]:
    """The text, the tool calls and what the trajectory records of a completion
    (``completion``, ``tool_calls``, ``usage``, ``model``, ``finish_reason``,
    token ids and logprobs), each of the type the records promise: the client
    builds the response without validating it, so a server may have sent any
    shape. A field of the wrong type is left out (or null); content that is
    not text is no text, and the last item says why (else None)."""
    info: dict[str, Any] = {}
    choices = completion.choices
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = getattr(choice, "message", None)
    text, content_error = _text_of(getattr(message, "content", None))
    tool_calls = getattr(message, "tool_calls", None) or []
    if not isinstance(tool_calls, list):
        tool_calls = []
    raw = text  # None when the server sent no text: recorded as null, not ""
    if tool_calls:
        calls = []
        for call in tool_calls:
            name, arguments = tool_call_parts(call)
            if name is not None or arguments is not None:
                calls.append({"name": _str_or_none(name), "arguments": arguments})
        info["tool_calls"] = calls
        if not raw:
            raw = "\n".join(str(c["arguments"]) for c in calls) or None
    info["completion"] = raw
    usage = getattr(completion, "usage", None)
    if usage is not None:
        info["usage"] = {
            key: _count(getattr(usage, key, None))
            for key in ("prompt_tokens", "completion_tokens", "total_tokens")
        }
    if isinstance(model := getattr(completion, "model", None), str):
        info["model"] = model  # the one that answered (a router may pick it)
    if choice is not None:
        if isinstance(reason := getattr(choice, "finish_reason", None), str):
            info["finish_reason"] = reason  # "length": the answer was cut
        info.update(_token_info(completion, choice))
    return text, tool_calls, info, content_error


def _text_of(content: Any) -> tuple[str | None, str | None]:
    """A message's text, and why there is none when its content is not text.
    A list of content parts (``[{"type": "text", "text": ...}]``, which some
    servers send) is joined."""
    if content is None or isinstance(content, str):
        return content, None
    if isinstance(content, list):
        parts = [
            part.get("text") if isinstance(part, Mapping) else getattr(part, "text", None)
            for part in content
        ]
        texts = [t for t in parts if isinstance(t, str)]
        if texts:
            return "".join(texts), None
    return None, f"the message content is {type(content).__name__}, not text"


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: Any) -> int | None:
    """A token count as the records promise it: an int in 64 bits, else null."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63:
        return value
    return None


def _shown_body(body: object) -> str:
    """The start of a response body that is not a completion, on one line."""
    text = " ".join(str(body).split())
    return repr(text[:80] + ("..." if len(text) > 80 else "")) if text else "an empty body"


def _token_info(completion: Any, choice: Any) -> dict[str, Any]:
    """Token ids and logprobs, in whichever form the server returned them."""
    out: dict[str, Any] = {}
    # Each list kept only when every item has the type the records promise
    # (a float per logprob, a str per token, an int per token id).
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if isinstance(content, list) and content:
        logprobs = [getattr(item, "logprob", None) for item in content]
        if all(isinstance(x, int | float) and not isinstance(x, bool) for x in logprobs):
            out["logprobs"] = [float(x) for x in logprobs]
        tokens = [getattr(item, "token", None) for item in content]
        if all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
            try:  # vLLM's return_tokens_as_token_ids
                ids = _ids([int(t.removeprefix("token_id:")) for t in tokens])
            except ValueError:
                out["tokens"] = tokens
            else:
                if ids is not None:
                    out["token_ids"] = ids
        elif all(isinstance(t, str) for t in tokens):
            out["tokens"] = tokens
    ids = _ids(getattr(choice, "token_ids", None))  # vLLM's return_token_ids
    if ids is not None:
        out["token_ids"] = ids
    prompt_ids = _ids(getattr(completion, "prompt_token_ids", None))
    if prompt_ids is not None:
        out["prompt_token_ids"] = prompt_ids
    return out


def _ids(value: Any) -> list[int] | None:
    """A list of token ids, if ``value`` is one (ints in 64 bits), else None."""
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        return None
    ids = list(value)
    return ids if all(_count(i) is not None for i in ids) else None


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
    key = api_key or os.environ.get("OPENAI_API_KEY") or _NO_KEY
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
        raise LLMEndpointError(_redact(failure, key))
    assert served is not None
    if model not in served:
        listed = ", ".join(served[:20]) + (
            f", ... ({len(served)} in all)" if len(served) > 20 else ""
        )
        raise LLMEndpointError(
            _redact(f"model {model!r} is not served by {url}; served: {listed or 'none'}", key)
        )
