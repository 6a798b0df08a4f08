"""A local OpenAI-compatible chat-completions server that plays ChaosOps sensibly.

For demos and tests of the LLM path without a GPU or an account::

    chaosops mock-llm --port 8000 --latency uniform:20-80ms
    chaosops run --policy llm --base-url http://127.0.0.1:8000/v1 --model chaosops-mock

Routes: ``POST /v1/chat/completions``, ``GET /v1/models``, and for tests
``GET /stats`` (requests, peak of requests in flight, dropped connections, ...)
and ``POST /stats/reset``.

The answer is chosen by reading the rendered observation in the last user
message (the format of :mod:`chaosops.agents.llm.render`) and applying a
heuristic close to SPEC section 11's, with knowledge of the log signatures of
each failure, so that episodes driven through it resolve incidents. When the
request offers tools (and ``tool_choice`` is not ``"none"``) it answers with a
``take_action`` tool call, else with text (see ``answer_style``).

Latency specs (``MockLLMConfig.latency``): ``"50ms"``, ``"0.05s"``, ``"50"``
(milliseconds), ``"uniform:20-80ms"``, ``"normal:50,10ms"`` (mean, standard
deviation; clipped at 0), ``"exp:50ms"`` (exponential with that mean).

Faults: each request draws, from one ``random.Random(seed)`` shared by all
requests (so the sequence follows the arrival order), a 429 (answered at once,
with ``Retry-After`` and ``retry-after-ms``), a 500 (after the latency) or an
unparseable answer, with the configured rates.

The server binds 127.0.0.1 unless told otherwise and never logs request bodies
or headers (an API key sent to it is compared, never stored or echoed).
"""

from __future__ import annotations

import argparse
import errno
import math
import random
import re
import secrets
import socket
import sys
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, Literal

import anyio
import anyio.abc
import anyio.from_thread
import orjson
import uvicorn
from pydantic import BaseModel, Field, field_validator
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from chaosops.agents.llm.render import RenderedView, read_rendered

__all__ = [
    "MockLLMConfig",
    "MockLLMHandle",
    "MockStats",
    "create_app",
    "decide_action",
    "main",
    "parse_latency",
    "run_mock_llm_in_thread",
    "serve",
]

_UNITS = {"ms": 0.001, "s": 1.0, "": 0.001}
_NUM = r"(\d+(?:\.\d*)?|\.\d+)"
_FIXED = re.compile(rf"^{_NUM}\s*(ms|s)?$")
_UNIFORM = re.compile(rf"^uniform:\s*{_NUM}\s*(ms|s)?\s*-\s*{_NUM}\s*(ms|s)?$")
_NORMAL = re.compile(rf"^normal:\s*{_NUM}\s*(ms|s)?\s*,\s*{_NUM}\s*(ms|s)?$")
_EXP = re.compile(rf"^exp:\s*{_NUM}\s*(ms|s)?$")


def parse_latency(spec: str) -> Callable[[random.Random], float]:
    """Turn a latency spec into a sampler ``rng -> seconds`` (see the module doc)."""
    text = spec.strip().lower()
    if m := _FIXED.match(text):
        value = float(m.group(1)) * _UNITS[m.group(2) or ""]
        return lambda rng: value
    if m := _UNIFORM.match(text):
        unit_hi = m.group(4) or m.group(2) or ""
        lo = float(m.group(1)) * _UNITS[m.group(2) or unit_hi]
        hi = float(m.group(3)) * _UNITS[unit_hi]
        if hi < lo:
            raise ValueError(f"latency {spec!r}: the upper bound is below the lower one")
        return lambda rng: rng.uniform(lo, hi)
    if m := _NORMAL.match(text):
        unit = m.group(4) or m.group(2) or ""
        mean = float(m.group(1)) * _UNITS[m.group(2) or unit]
        std = float(m.group(3)) * _UNITS[unit]
        return lambda rng: max(0.0, rng.gauss(mean, std))
    if m := _EXP.match(text):
        mean = float(m.group(1)) * _UNITS[m.group(2) or ""]
        return lambda rng: rng.expovariate(1.0 / mean) if mean > 0 else 0.0
    raise ValueError(
        f"latency {spec!r} not understood; accepted: '50ms', '0.05s', 'uniform:20-80ms', "
        "'normal:50,10ms', 'exp:50ms'"
    )


class MockLLMConfig(BaseModel):
    """Settings of the mock server (all optional)."""

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    model: str = "chaosops-mock"
    latency: str = "0ms"
    rate_429: float = Field(default=0.0, ge=0.0, le=1.0)
    retry_after_s: float = Field(default=0.05, ge=0.0)
    rate_500: float = Field(default=0.0, ge=0.0, le=1.0)
    rate_garbage: float = Field(default=0.0, ge=0.0, le=1.0)
    answer_style: Literal["json", "fenced", "chatter", "mixed"] = "json"
    seed: int = 0
    first_statuses: list[Literal[200, 429, 500]] = Field(default_factory=list)
    """Scripted faults: the first requests answer these statuses, in order, before
    the random rates apply (200 = a normal answer); for tests and demos."""
    api_key: str | None = Field(default=None, repr=False)
    """When set, requests must carry ``Authorization: Bearer <api_key>`` (else 401)."""

    @field_validator("latency")
    @classmethod
    def _check_latency(cls, value: str) -> str:
        parse_latency(value)
        return value


@dataclass
class MockStats:
    """Counters of a running mock server (``GET /stats``)."""

    requests: int = 0
    completed: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0
    disconnected: int = 0
    rate_limited: int = 0
    server_errors: int = 0
    garbage: int = 0
    tool_calls: int = 0
    by_status: dict[str, int] = field(default_factory=dict)

    def snapshot(self) -> dict[str, Any]:
        """A plain-dict copy."""
        return asdict(self)


# --- the heuristic ---------------------------------------------------------------

_SEVERITY = {"down": 0, "critical": 1, "degraded": 2}
_ROGUE_AGENTS = ("autoscaler", "load_balancer", "deploy_bot")


def _action(action_type: str, target: str | None = None, **args: Any) -> dict[str, Any]:
    return {"action_type": action_type, "target": target, "args": args}


def decide_action(view: RenderedView) -> dict[str, Any]:
    """Pick an action from a rendered view (what the mock answers)."""
    role = view.role or "sre"
    chat = " ".join(view.chat + view.inbox).lower()
    if role == "manager":
        if "resolved" in chat or "healthy" in chat:
            return _action("resolve")
        if not view.alerts:
            return _action("noop")
        return _action(
            "communicate",
            message="SRE: diagnose. Dev: stage a rollback. Oversight: watch the fleet.",
            to="all",
        )

    unhealthy = sorted(
        (name for name, m in view.metrics.items() if m["health"] in _SEVERITY),
        key=lambda name: _SEVERITY[view.metrics[name]["health"]],
    )
    if role == "oversight":
        alerts = " ".join(message.lower() for _, _, message in view.alerts)
        for agent, _, target in view.fleet_actions:
            if agent in _ROGUE_AGENTS and (
                not view.metrics or target in unhealthy or agent in alerts
            ):
                return _action("flag_rogue", agent)
        return _action("communicate", message="no rogue agent activity detected", to="all")

    if not unhealthy:
        return _action("communicate", message="systems nominal from my view", to="all")
    logs = [(svc, msg.lower()) for svc, _, msg in view.logs]
    text = " ".join(msg for _, msg in logs)
    alerts = " ".join(message.lower() for _, _, message in view.alerts)
    if any(k in text or k in alerts for k in ("shadow cluster", "misrout", "backends healthy")):
        return _action("escalate")
    for svc, msg in logs:
        if svc in unhealthy and "config" in msg and ("rolled out" in msg or "pushed" in msg):
            return _action("rollback", svc)
    if "deadlock" in text and "db" in unhealthy:
        if "notifications" in unhealthy:
            return _action("restart", "notifications")
        return _action("restart", "db")
    if "db" in unhealthy and ("no space left" in text or "disk usage" in text):
        return _action("scale", "db", replicas=2)
    if "auth" in unhealthy and ("nxdomain" in text or "dns" in text):
        return _action("restart", "auth")
    worst = unhealthy[0]
    m = view.metrics[worst]
    if m["replicas"] < 3 and m["cpu_pct"] > 80:
        return _action("scale", worst, replicas=4)
    return _action("restart", worst)


_GARBAGE = (
    "Let me think about this incident step by step before acting.",
    "I'd restart something, probably the database? Not sure.",
    "{action_type: restart, target: db",
    '{"action_type": "reboot_everything", "target": "all"}',
    '```json\n{"action": \n```',
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

        cfg, rng = self.config, self.rng
        delay = self.latency(rng)
        fault = rng.random()
        garbage = rng.random() < cfg.rate_garbage
        style = cfg.answer_style
        if style == "mixed":
            style = rng.choice(("json", "fenced", "chatter"))
        if self.scripted:
            status = self.scripted.pop(0)
        elif fault < cfg.rate_429:
            status = 429
        elif fault < cfg.rate_429 + cfg.rate_500:
            status = 500
        else:
            status = 200
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

        action = decide_action(read_rendered(_user_text(body["messages"])))
        tools = body.get("tools") or []
        use_tool = bool(tools) and body.get("tool_choice", "auto") != "none"
        tool_calls: list[dict[str, Any]] | None = None
        if garbage:
            self.stats.garbage += 1
            content: str | None = rng.choice(_GARBAGE)
            use_tool = False
        elif use_tool:
            self.stats.tool_calls += 1
            arguments = orjson.dumps(action).decode()
            tool_calls = [
                {
                    "id": f"call_{rng.getrandbits(48):012x}",
                    "type": "function",
                    "function": {"name": "take_action", "arguments": arguments},
                }
            ]
            content = None
        else:
            content = self._text(action, style)

        completion_text = content if content is not None else tool_calls[0]["function"]["arguments"]  # type: ignore[index]
        tokens = _tokens(completion_text)
        prompt_chars = sum(len(_user_text([m])) for m in body["messages"]) + sum(
            len(str(m.get("content") or ""))
            for m in body["messages"]
            if isinstance(m, dict) and m.get("role") == "system"
        )
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": content, "tool_calls": tool_calls},
            "finish_reason": "tool_calls" if tool_calls else "stop",
            "logprobs": None,
        }
        token_ids = [zlib.crc32(t.encode()) % 50_000 for t in tokens]
        if body.get("logprobs"):
            as_ids = bool(body.get("return_tokens_as_token_ids"))
            choice["logprobs"] = {
                "content": [
                    {
                        "token": f"token_id:{tid}" if as_ids else tok,
                        "logprob": -round(rng.random() * 0.5, 4),
                        "bytes": list(tok.encode()),
                        "top_logprobs": [],
                    }
                    for tok, tid in zip(tokens, token_ids, strict=True)
                ]
            }
        result: dict[str, Any] = {
            "id": f"chatcmpl-{rng.getrandbits(64):016x}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": cfg.model,
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt_chars // 4,
                "completion_tokens": len(tokens),
                "total_tokens": prompt_chars // 4 + len(tokens),
            },
        }
        if body.get("return_token_ids"):
            choice["token_ids"] = token_ids
        return _json(result)

    def _text(self, action: dict[str, Any], style: str) -> str:
        data = orjson.dumps(action).decode()
        if style == "fenced":
            return f"Here is my action:\n```json\n{data}\n```"
        if style == "chatter":
            return f"Looking at the metrics, the best move is {data} - let's go."
        return data


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


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Add the mock's options to ``parser`` (or a new one); used by ``chaosops mock-llm``."""
    p = parser or argparse.ArgumentParser(
        prog="chaosops mock-llm",
        description="Local OpenAI-compatible chat-completions server playing ChaosOps.",
    )
    d = MockLLMConfig()
    p.add_argument("--host", default=d.host, help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=d.port, help="port (0 picks a free one)")
    p.add_argument("--model", default=d.model, help="served model name")
    p.add_argument(
        "--latency",
        default=d.latency,
        help="per-request latency: 50ms, 0.05s, uniform:20-80ms, normal:50,10ms, exp:50ms",
    )
    p.add_argument("--rate-429", type=float, default=0.0, help="share of 429 answers")
    p.add_argument("--retry-after", type=float, default=d.retry_after_s, help="429 Retry-After, s")
    p.add_argument("--rate-500", type=float, default=0.0, help="share of 500 answers")
    p.add_argument("--rate-garbage", type=float, default=0.0, help="share of unparseable answers")
    p.add_argument(
        "--answer-style", default=d.answer_style, choices=["json", "fenced", "chatter", "mixed"]
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--require-api-key",
        metavar="ENV_VAR",
        default=None,
        help="require the key held in this environment variable (never printed)",
    )
    return p


def config_from_args(args: argparse.Namespace) -> MockLLMConfig:
    """Build a :class:`MockLLMConfig` from parsed :func:`build_parser` options."""
    import os

    key = None
    if args.require_api_key:
        key = os.environ.get(args.require_api_key)
        if not key:
            raise ValueError(
                f"--require-api-key: environment variable {args.require_api_key} is empty"
            )
    return MockLLMConfig(
        host=args.host,
        port=args.port,
        model=args.model,
        latency=args.latency,
        rate_429=args.rate_429,
        retry_after_s=args.retry_after,
        rate_500=args.rate_500,
        rate_garbage=args.rate_garbage,
        answer_style=args.answer_style,
        seed=args.seed,
        api_key=key,
    )


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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``chaosops mock-llm``; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = config_from_args(args)
    except ValueError as exc:
        message = str(exc).splitlines()[0]
        if hasattr(exc, "errors"):  # pydantic: name the field
            err = exc.errors()[0]  # type: ignore[attr-defined]
            message = f"{'.'.join(map(str, err['loc']))}: {err['msg']}"
        print(f"chaosops mock-llm: {message}", file=sys.stderr)
        return 2
    try:
        anyio.run(serve_until_stopped, config, backend="asyncio")
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        print(f"chaosops mock-llm: {listen_error(exc, config.host, config.port)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
