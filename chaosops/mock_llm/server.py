"""The OpenAI-compatible HTTP server: chat completions, models, stats."""

from __future__ import annotations

import errno
import math
import random
import re
import secrets
import socket
import time
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from chaosops.agents.llm.render import read_rendered

from .config import MockLLMConfig, MockStats
from .latency import parse_latency
from .player import GARBAGE, decide_action
from .schema import request_schema, within

# What llama-cpp-python's server answers to response_format json_schema: its
# request model's validation error, as an HTTP 500.
_LLAMA_CPP_REFUSAL = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
    "'ctx': {'expected': \"'text' or 'json_object'\"}}"
)


def _user_text(messages: Sequence[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "\n".join(
                    str(part.get("text", "")) for part in content if isinstance(part, dict)
                )
    return ""


def _tokens(text: str) -> list[str]:
    return re.findall(r"\s+|[A-Za-z0-9_]+|[^\sA-Za-z0-9_]", text)


def _prompt_chars(messages: Sequence[Any]) -> int:
    # The user messages' text and the system prompt's: a rough prompt size.
    return sum(len(_user_text([m])) for m in messages) + sum(
        len(str(m.get("content") or ""))
        for m in messages
        if isinstance(m, dict) and m.get("role") == "system"
    )


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(data), status, headers, media_type="application/json")


def _error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> Response:
    return _json({"error": {"message": message, "type": kind, "code": kind}}, status, headers)


class _MockLLM:
    def __init__(self, config: MockLLMConfig) -> None:
        self.config = config
        self.stats = MockStats()
        self.rng = random.Random(config.seed)
        self.latency = parse_latency(config.latency)
        self.scripted: list[int] = list(config.first_statuses)

    def _count(self, status: int) -> None:
        key = str(status)
        self.stats.by_status[key] = self.stats.by_status.get(key, 0) + 1

    def _authorized(self, request: Request) -> bool:
        if self.config.api_key is None:
            return True
        header = request.headers.get("authorization", "")
        return secrets.compare_digest(header.encode(), f"Bearer {self.config.api_key}".encode())

    async def models(self, request: Request) -> Response:
        if not self._authorized(request):
            return _error(401, "invalid API key", "invalid_api_key")
        return _json(
            {
                "object": "list",
                "data": [
                    {"id": self.config.model, "object": "model", "created": 0, "owned_by": "mock"}
                ],
            }
        )

    async def stats_route(self, request: Request) -> Response:
        return _json(self.stats.snapshot())

    async def reset_stats(self, request: Request) -> Response:
        in_flight = self.stats.in_flight
        self.stats = MockStats(in_flight=in_flight, peak_in_flight=in_flight)
        return _json(self.stats.snapshot())

    async def chat(self, request: Request) -> Response:
        stats = self.stats
        stats.requests += 1
        stats.in_flight += 1
        stats.peak_in_flight = max(stats.peak_in_flight, stats.in_flight)
        status = 200
        try:
            response = await self._chat(request)
            status = response.status_code
            return response
        finally:
            stats.in_flight -= 1
            if status == 499:
                stats.disconnected += 1
            else:
                stats.completed += 1
            self._count(status)

    async def _sleep_or_disconnect(self, request: Request, seconds: float) -> bool:
        """Sleep; True if the client dropped the connection meanwhile."""
        if seconds <= 0:
            return False
        dropped = False
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                nonlocal dropped
                while True:
                    message = await request.receive()
                    if message["type"] == "http.disconnect":
                        dropped = True
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(watch)
            await anyio.sleep(seconds)
            tg.cancel_scope.cancel()
        return dropped

    async def _chat(self, request: Request) -> Response:
        body = await self._read(request)
        if isinstance(body, Response):
            return body
        if self.config.record is not None:
            self._record(body)
        if (refusal := self._refusal(body)) is not None:
            self.stats.refused += 1
            return refusal
        cfg, rng = self.config, self.rng
        delay = self.latency(rng)
        status = self._draw_status()
        garbage = rng.random() < cfg.rate_garbage
        style = cfg.answer_style
        if style == "mixed":
            style = rng.choice(("json", "fenced", "chatter"))
        if status == 429:
            self.stats.rate_limited += 1
            retry = {
                "Retry-After": str(max(0, math.ceil(cfg.retry_after_s))),
                "retry-after-ms": str(round(cfg.retry_after_s * 1000)),
            }
            return _error(429, "rate limited, slow down", "rate_limit_exceeded", retry)
        if await self._sleep_or_disconnect(request, delay):
            return Response(status_code=499)
        if status == 500:
            self.stats.server_errors += 1
            return _error(500, "internal error (injected)", "server_error")
        if status == 400:
            return _error(400, "'max_tokens' must be at most 4096 (injected)", "invalid_request")
        return _json(self._completion(body, garbage, style))

    def _refusal(self, body: dict[str, Any]) -> Response | None:
        """The refusal of a request form this mock is set to refuse, else None."""
        refuse = self.config.refuse
        fmt = body.get("response_format")
        if "json_schema" in refuse and isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            return _error(500, _LLAMA_CPP_REFUSAL, "internal_server_error")
        if "tools" in refuse and body.get("tools"):
            return _error(400, "'tools' is not supported by this server", "invalid_request")
        return None

    async def _read(self, request: Request) -> dict[str, Any] | Response:
        """The request's JSON body, or the error response it earns."""
        if not self._authorized(request):
            return _error(401, "invalid API key", "invalid_api_key")
        try:
            raw = await request.body()
        except ClientDisconnect:  # cancelled at its deadline before the body was read
            return Response(status_code=499)
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return _error(400, "request body is not JSON", "invalid_request_error")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "'messages' must be a list", "invalid_request_error")
        if body.get("model") != self.config.model:
            return _error(
                404, f"model {str(body.get('model'))[:80]!r} not found", "model_not_found"
            )
        return body

    def _record(self, body: dict[str, Any]) -> None:
        """Append the request as received, one JSON line (``--record``), in one write."""
        with open(self.config.record, "ab") as handle:  # type: ignore[arg-type]
            handle.write(orjson.dumps(body) + b"\n")

    def _draw_status(self) -> int:
        """200, or a fault: the scripted ones first, then the configured rates."""
        cfg = self.config
        fault = self.rng.random()
        if self.scripted:
            return self.scripted.pop(0)
        if fault < cfg.rate_429:
            return 429
        if fault < cfg.rate_429 + cfg.rate_500:
            return 500
        return 200

    def _completion(self, body: dict[str, Any], garbage: bool, style: str) -> dict[str, Any]:
        """The chat completion answering ``body``: the player's action as text or a tool call."""
        action = _styled(decide_action(read_rendered(_user_text(body["messages"]))), style)
        if (schema := request_schema(body)) is not None:
            action, admitted = within(schema, action)
            self.stats.off_schema += not admitted
        content, tool_calls, finish = self._message(body, action, garbage, style)
        text = content if tool_calls is None else tool_calls[0]["function"]["arguments"]
        tokens = _tokens(text or "")
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": content, "tool_calls": tool_calls},
            "finish_reason": finish,
            "logprobs": None,
        }
        token_ids = [zlib.crc32(t.encode()) % 50_000 for t in tokens]
        if body.get("logprobs") and not self.config.null_logprobs:
            choice["logprobs"] = self._logprobs(tokens, token_ids, body)
        if body.get("return_token_ids"):
            choice["token_ids"] = token_ids
        prompt = _prompt_chars(body["messages"]) // 4
        return {
            "id": f"chatcmpl-{self.rng.getrandbits(64):016x}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.config.model,
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": len(tokens),
                "total_tokens": prompt + len(tokens),
            },
        }

    def _message(
        self, body: dict[str, Any], action: dict[str, Any], garbage: bool, style: str
    ) -> tuple[str | None, list[dict[str, Any]] | None, str]:
        """(content, tool calls, finish reason) of the answer: garbage, a tool
        call when tools are offered, else text; cut in half for the "cut" style."""
        if garbage:
            self.stats.garbage += 1
            content = self.rng.choice(GARBAGE)
        elif body.get("tools") and body.get("tool_choice", "auto") != "none":
            self.stats.tool_calls += 1
            arguments = orjson.dumps(action).decode()
            if style == "cut":  # cut at the token limit, as llama.cpp reports it
                arguments = arguments[: len(arguments) // 2]
            call = {
                "id": f"call_{self.rng.getrandbits(48):012x}",
                "type": "function",
                "function": {"name": "take_action", "arguments": arguments},
            }
            return None, [call], "tool_calls"
        else:
            content = self._text(action, style)
        if style == "cut":
            return content[: len(content) // 2], None, "length"
        return content, None, "stop"

    def _logprobs(
        self, tokens: list[str], token_ids: list[int], body: dict[str, Any]
    ) -> dict[str, Any]:
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        return {
            "content": [
                {
                    "token": f"token_id:{tid}" if as_ids else tok,
                    "logprob": -round(self.rng.random() * 0.5, 4),
                    "bytes": list(tok.encode()),
                    "top_logprobs": [
                        {"token": f"{tok}~{k}", "logprob": -1.0 - k, "bytes": None}
                        for k in range(int(body.get("top_logprobs") or 0))
                    ],
                }
                for tok, tid in zip(tokens, token_ids, strict=True)
            ]
        }

    def _text(self, action: dict[str, Any], style: str) -> str:
        data = orjson.dumps(action).decode()
        if style == "fenced":
            return f"Here is my action:\n```json\n{data}\n```"
        if style == "chatter":
            return f"Looking at the metrics, the best move is {data} - let's go."
        return data


def _styled(action: dict[str, Any], style: str) -> dict[str, Any]:
    """The player's action as a faulty model would write it: the answer format's
    placeholder as the target, or arguments the action does not take."""
    if style == "placeholder":
        return {**action, "target": "<service, agent or null>"}
    if style == "junk-args":
        return {**action, "args": {**action["args"], "please": "now", "replicas": "lots"}}
    return action


def create_app(config: MockLLMConfig | None = None) -> Starlette:
    """The mock's ASGI app; its state (``app.state.mock.stats``) is readable in-process."""
    mock = _MockLLM(config or MockLLMConfig())
    app = Starlette(
        routes=[
            Route("/v1/chat/completions", mock.chat, methods=["POST"]),
            Route("/v1/models", mock.models, methods=["GET"]),
            Route("/stats", mock.stats_route, methods=["GET"]),
            Route("/stats/reset", mock.reset_stats, methods=["POST"]),
        ]
    )
    app.state.mock = mock
    return app


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, *, signals: bool) -> None:
        super().__init__(config)
        self._signals = signals

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        if self._signals:
            with super().capture_signals():
                yield
        else:
            yield


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY only on accepted sockets
    # whose proto says TCP (socket.create_server leaves it 0, and every response
    # then waits ~40 ms for the client's delayed ACK).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(4096)
    except OSError:
        sock.close()
        raise
    return sock


async def serve(
    config: MockLLMConfig | None = None,
    *,
    app: Starlette | None = None,
    install_signal_handlers: bool = False,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the mock until cancelled (or, with signal handlers, until Ctrl-C).

    Binds ``config.host:config.port`` (port 0 picks a free one) and reports the
    bound port through ``task_status``: ``port = await tg.start(serve, config)``.
    Runs on the asyncio backend (uvicorn).
    """
    config = config or MockLLMConfig()
    app = app or create_app(config)
    sock = _listen(config.host, config.port)
    port = sock.getsockname()[1]
    server = _Server(
        uvicorn.Config(
            app,
            host=config.host,
            port=port,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            backlog=4096,
            timeout_graceful_shutdown=1,
        ),
        signals=install_signal_handlers,
    )
    finished = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                try:
                    # shielded: shutdown goes through should_exit, so that open
                    # connections are closed properly
                    with anyio.CancelScope(shield=True):
                        await server.serve(sockets=[sock])
                finally:
                    finished.set()
                    tg.cancel_scope.cancel()

            tg.start_soon(run)
            task_status.started(port)
            try:
                await anyio.sleep_forever()
            finally:
                server.should_exit = True
                with anyio.CancelScope(shield=True):
                    await finished.wait()
    finally:
        sock.close()


@dataclass
class MockLLMHandle:
    """A mock server running in a background thread (see :func:`run_mock_llm_in_thread`)."""

    port: int
    base_url: str
    app: Starlette

    def stats(self) -> dict[str, Any]:
        """A copy of the server's counters."""
        return self.app.state.mock.stats.snapshot()


@contextmanager
def run_mock_llm_in_thread(config: MockLLMConfig | None = None) -> Iterator[MockLLMHandle]:
    """Run the mock in a background thread for synchronous code; stops on exit."""
    config = config or MockLLMConfig(port=0)
    app = create_app(config)
    with anyio.from_thread.start_blocking_portal("asyncio") as portal:
        future, port = portal.start_task(partial(serve, config, app=app))
        host = f"[{config.host}]" if ":" in config.host else config.host
        try:
            yield MockLLMHandle(port=port, base_url=f"http://{host}:{port}/v1", app=app)
        finally:
            future.cancel()


class _Announce:
    """The ``task_status`` of :func:`serve_until_stopped`: prints the listening line."""

    def __init__(self, config: MockLLMConfig) -> None:
        self.config = config

    def started(self, port: int | None = None) -> None:
        config = self.config
        host = f"[{config.host}]" if ":" in config.host else config.host
        print(
            f"mock LLM serving model {config.model!r} at http://{host}:{port}/v1 "
            f"(latency {config.latency}); Ctrl-C to stop",
            flush=True,
        )


async def serve_until_stopped(config: MockLLMConfig) -> None:
    """Serve until Ctrl-C (or SIGTERM), printing one line once listening.

    No task group around :func:`serve`, so that a failure to listen (the port
    taken, say) comes out as the :class:`OSError` itself, not an exception group;
    :func:`listen_error` words it.
    """
    await serve(config, install_signal_handlers=True, task_status=_Announce(config))


def listen_error(exc: OSError, host: str, port: int) -> str:
    """One line saying why the mock cannot listen on ``host:port``, and what to do."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if isinstance(exc, socket.gaierror):
        return (
            f"cannot listen on {where}: unknown host {host!r} ({exc.strerror}); "
            "choose another --host"
        )
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {port} on {host} is already in use; choose another --port (0 picks a free one)"
        )
    if exc.errno in (errno.EACCES, errno.EPERM):
        return (
            f"no permission to listen on port {port} on {host}; "
            "choose another --port (>= 1024, or 0 for a free one)"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return (
            f"cannot listen on {where}: {host} is not an address of this machine; "
            "choose another --host (default 127.0.0.1)"
        )
    return f"cannot listen on {where}: {exc.strerror or exc}"
