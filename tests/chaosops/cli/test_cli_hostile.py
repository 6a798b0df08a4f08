"""Hostile LLM servers (small servers of the tests' own, on loopback): huge
answers, a key echoed back, a web page for a model list, no answer at all;
and absurd values. Each is bounded, reported in one line, and loses nothing."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ._cli import assert_one_error_line, chaosops, jsonl, llm_run

KEY = "sk-hostile-echo-5150"
MODEL = "chaosops-mock"


def _app(mode: str) -> Starlette:
    async def models(request: Request) -> Response:
        if mode == "html-models":
            return Response("<html><body>Sign in to the proxy</body></html>", 200,
                            media_type="text/html")  # fmt: skip
        return Response(orjson.dumps({"data": [{"id": MODEL}]}), media_type="application/json")

    async def chat(request: Request) -> Response:
        await request.body()
        if mode == "never":
            await asyncio.sleep(60)
        echoed = request.headers.get("authorization", "")
        message: dict[str, Any] = {"role": "assistant", "content": {
            "huge": "x" * (5 << 20),
            "echo": echoed,
            "proxy": '{"action_type": "noop", "target": null, "args": {}}',
        }.get(mode)}  # fmt: skip
        model = MODEL
        if mode == "echo-tool":  # the key in a tool call's arguments object, and in its fields
            function = {"name": f"take_action {echoed}", "arguments": {"note": echoed}}
            message["tool_calls"] = [{"id": "c", "type": "function", "function": function}]
            model = f"{MODEL} {echoed}"
        answer = {
            "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        }
        return Response(orjson.dumps(answer), media_type="application/json")  # fmt: skip

    return Starlette(routes=[Route("/v1/models", models), Route("/v1/chat/completions", chat,
                                                                 methods=["POST"])])  # fmt: skip


PROXIED: list[str] = []


def _as_proxy(app: Any, seen: list[str]) -> Any:
    """``app`` answering as an HTTP proxy does: a request names the whole URL
    (absolute form), recorded in ``seen``, and is served from its path."""

    async def proxy(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append(scope["path"])
            scope = {**scope, "path": urlsplit(scope["path"]).path}
        await app(scope, receive, send)

    return proxy


@pytest.fixture
def hostile(request: pytest.FixtureRequest) -> Iterator[str]:
    """A server behaving as ``request.param`` says, in a thread; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    app: Any = _app(request.param)
    if request.param == "proxy":
        app = _as_proxy(app, PROXIED)
    # A request still waiting at the end ("never") is cancelled a second into the shutdown.
    config = uvicorn.Config(app, log_level="critical", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        assert not thread.is_alive(), "the server outlived its test"


@pytest.mark.parametrize("hostile", ["huge"], indirect=True)
def test_a_huge_answer_is_not_read_past_the_limit(work: Path, hostile: str) -> None:
    out = work / "huge"
    proc = chaosops(*llm_run(work, hostile, out, "--episodes-per-type", "1",
                             "--llm-max-failures", "0", "--role-policy", "sre=llm",
                             policy="random"), cwd=work)  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # the sre never played a move of its own
    assert "the sre (llm (chaosops-mock)) never played a move of its own" in proc.stderr
    steps = [s for s in jsonl(out / "trajectories.jsonl") if s["role"] == "sre"]
    assert steps and all("over 1048576 bytes" in s["error"] for s in steps)
    assert (out / "trajectories.jsonl").stat().st_size < 1 << 20
    assert "played the fallback after a policy error or a failed LLM call" in proc.stderr
    # the run's log holds each policy_error with its traceback: the note says where
    assert f"each policy_error with its traceback in {out / 'log.jsonl'}" in proc.stderr


@pytest.mark.parametrize(
    ("hostile", "completion"),
    [("echo", "Bearer ***"), ("echo-tool", '{"note":"Bearer ***"}')],
    indirect=["hostile"],
)
def test_a_key_echoed_back_is_written_nowhere(
    work: Path, hostile: str, completion: str, tmp_path: Path
) -> None:
    out = tmp_path / "echo"
    log = tmp_path / "echo.log"
    proc = chaosops(*llm_run(work, hostile, out, "--episodes-per-type", "1", "--llm-api-key",
                             KEY, "--log-json", log), cwd=work)  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # an echo is no move
    completions = [s["completion"] for s in jsonl(out / "trajectories.jsonl")]
    assert completions and all(c == completion for c in completions)  # it did come back
    for path in [*out.iterdir(), log]:
        assert KEY.encode() not in path.read_bytes(), path.name
    assert KEY not in proc.stdout + proc.stderr


@pytest.mark.parametrize("hostile", ["html-models"], indirect=True)
def test_a_web_page_for_the_model_list_is_one_line(work: Path, hostile: str) -> None:
    proc = chaosops(*llm_run(work, hostile, work / "html"), cwd=work)
    assert proc.returncode == 1
    assert_one_error_line(proc, "GET /models", "not JSON")


@pytest.mark.parametrize("hostile", ["never"], indirect=True)
def test_a_server_that_never_answers_stops_the_run(work: Path, hostile: str) -> None:
    out = work / "never"
    proc = chaosops(*llm_run(work, hostile, out, "--turn-timeout", "0.05",
                             "--llm-max-failures", "4"), cwd=work)  # fmt: skip
    assert_one_error_line(proc, "LLM calls in a row failed for good", "--model-max-failures 4",
                          "no answer within", "--resume")  # fmt: skip
    assert proc.returncode == 1
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["complete"] is False


def test_an_absurd_in_flight_limit_is_refused(work: Path) -> None:
    proc = chaosops("run", "--policy", "llm", "--llm-max-in-flight", "1000000000", cwd=work)
    assert_one_error_line(proc, "--llm-max-in-flight", "1 to 100000")
    assert proc.returncode == 2


def test_a_suite_that_is_no_regular_file_or_nests_too_deep_is_one_line(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.toml")  # reading it would block forever
    (tmp_path / "deep.toml").write_text("a = " + "[" * 600 + "]" * 600 + "\n")
    cases = {
        str(tmp_path / "fifo.toml"): "not a regular file",
        "/dev/zero": "not a regular file",  # reading it would never end
        str(tmp_path / "deep.toml"): "nested too deeply",
    }
    for path, needle in cases.items():
        proc = chaosops("run", path, "--no-progress", "--out", tmp_path / "out", cwd=tmp_path)
        assert proc.returncode == 2
        assert_one_error_line(proc, path, needle)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("hostile", ["proxy"], indirect=True)
def test_the_proxy_the_environment_names_carries_the_requests(
    work: Path, hostile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    PROXIED.clear()
    monkeypatch.setenv("HTTP_PROXY", hostile.removesuffix("/v1"))
    monkeypatch.setenv("NO_PROXY", "")
    out = work / "proxied"
    # a host no resolver knows: only the proxy can answer for it
    proc = chaosops(*llm_run(work, "http://llm.invalid:9/v1", out, "--limit", "1"), cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert PROXIED[0] == "http://llm.invalid:9/v1/models"
    assert "http://llm.invalid:9/v1/chat/completions" in PROXIED
    monkeypatch.setenv("NO_PROXY", "llm.invalid")  # now asked directly: no such host
    proc = chaosops(*llm_run(work, "http://llm.invalid:9/v1", work / "direct"), cwd=work)
    assert_one_error_line(proc, "llm.invalid")


@pytest.mark.parametrize("hostile", ["echo"], indirect=True)
def test_a_netrc_login_for_the_host_does_not_clash_with_the_key(
    work: Path, hostile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    netrc = work / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password elsewhere\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    out = work / "netrc-run"
    proc = chaosops(*llm_run(work, hostile, out, "--limit", "1"), cwd=work)
    assert proc.returncode == 1, proc.stderr  # an echo is no move
    sent = {s["completion"] for s in jsonl(out / "trajectories.jsonl") if s["completion"]}
    assert sent and all(text.startswith("Bearer ") for text in sent)  # our key, not netrc's
