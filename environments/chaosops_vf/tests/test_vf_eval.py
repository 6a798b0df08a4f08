"""The taskset ``chaosops-vf`` through verifiers' own ``vf-eval``, offline:
``chaosops mock-llm`` on loopback is the model, and the outcomes must be
those of ``chaosops run`` against the same server.

Runs in this package's own virtual environment (verifiers 0.4 needs
``openai<3``; chaosops' test extra pins ``openai>=3.54``): see README.md.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from chaosops.agents.llm import read_rendered
from chaosops.mock_llm import decide_action

BIN = Path(sys.executable).parent
SELECTION = ("--env.taskset.tier", "hard",
             "--env.taskset.failure-type", "misrouted_traffic", "rogue_deploy_bot")  # fmt: skip


def _command(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    assert found, f"{name} is not installed: pip install -e environments/chaosops_vf"
    return found


@pytest.fixture(scope="module")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _mock(tmp_path_factory.mktemp("mock"))


def _mock(cwd: Path, *options: str) -> Iterator[str]:
    """``chaosops mock-llm`` on a free loopback port: its base URL, stopped after."""
    proc = subprocess.Popen(
        [_command("chaosops"), "mock-llm", "--port", "0", "--model", "chaosops-mock", *options],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once it listens
        assert "http://" in line, line
        yield line.split(" at ", 1)[1].split()[0]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def vf_eval(url: str, out: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_command("vf-eval"), "chaosops-vf", "-m", "chaosops-mock", "--client.base-url", url,
         "--client.api-key-var", "CHAOSOPS_MOCK_KEY", "--no-push", "-o", str(out), *options],
        cwd=out.parent, capture_output=True, text=True, timeout=600,
        env={**os.environ, "CHAOSOPS_MOCK_KEY": "unused"},
    )  # fmt: skip


def episodes(out: Path) -> list[dict[str, Any]]:
    """The episodes of the one run under ``out``, as vf-eval wrote them."""
    (path,) = out.glob("*/traces.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def _outcome(record: dict[str, Any]) -> tuple[Any, ...]:
    return (
        record["resolved"],
        record["cumulative_reward"],
        record["final_step"],
        record["wrong_fixes"],
        [(s["role"], s["action"]) for s in record["steps"]],
    )


def _key(record: dict[str, Any]) -> tuple[Any, ...]:
    return (record["failure_type"], record["difficulty"], record["seed"])


@pytest.fixture(scope="module")
def played(mock: str, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("vf") / "outputs"
    proc = vf_eval(mock, out, *SELECTION, "--env.models", "sre", "dev", "-r", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return episodes(out)


def test_vf_eval_plays_the_episodes_chaosops_run_plays(
    played: list[dict[str, Any]], mock: str, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    proc = subprocess.run(
        [_command("chaosops"), "run", "--policy", "heuristic", "--role-policy", "sre=llm",
         "--role-policy", "dev=llm", "--llm-base-url", mock, "--tier", "hard",
         "--failure-type", "misrouted_traffic", "--failure-type", "rogue_deploy_bot",
         "--no-progress", "--out", str(run)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    by_run = {_key(r): _outcome(r) for r in map(json.loads, (run / "results.jsonl").open())}
    assert len(by_run) == 10
    assert len(played) == 20  # -r 2: each task twice
    for episode in played:
        assert episode["ok"], episode["errors"]
        records = [t["info"]["chaosops"] for t in episode["traces"]]
        record = records[0]
        assert all(r == record for r in records)  # one episode, seen from each seat
        assert _outcome(record) == by_run[_key(record)]
        seated = {s["role"] for s in record["steps"]} & {
            "sre",
            "dev",
        }  # one trace for each seat that moved
        assert sorted(t["agent"]["name"] for t in episode["traces"]) == sorted(seated)
        assert episode["task"]["key"] == "{failure_type}/{difficulty}/seed={seed}".format(**record)


def test_each_seat_s_trace_holds_chaosops_figures_and_its_model_calls(
    played: list[dict[str, Any]],
) -> None:
    for episode in played:
        for trace in episode["traces"]:
            record = trace["info"]["chaosops"]
            role = trace["agent"]["name"]
            assert trace["rewards"]["team_return"] == {
                "score": record["cumulative_reward"], "weight": 1.0,
            }  # fmt: skip
            assert trace["metrics"]["resolved"] == float(record["resolved"])
            turns = [s for s in record["steps"] if s["role"] == role]
            answers = [n for n in trace["nodes"] if n["message"]["role"] == "assistant"]
            assert len(answers) == len(turns) > 0  # one model call a turn, on the trace
            assert trace["metrics"]["legal"] == 1.0  # the mock answers every view legally
            views = [n["message"]["content"] for n in trace["nodes"]
                     if n["message"]["role"] == "user"]  # fmt: skip
            assert len(views) == len(turns)
            assert all(f"Your role: {role}." in view for view in views)


class _FirstLate(BaseHTTPRequestHandler):
    """A chat-completions endpoint that answers as ``chaosops mock-llm`` does,
    the first request of all only after ``LATE`` seconds (far past the
    deadline, so that the test's deadline can leave a loaded machine room for
    every later answer)."""

    LATE = 30.0
    asked = itertools.count()

    def do_POST(self) -> None:  # http.server calls it by this name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if next(self.asked) == 0:
            time.sleep(self.LATE)
        view = read_rendered(body["messages"][-1]["content"])
        answer = {"role": "assistant", "content": json.dumps(decide_action(view))}
        data = json.dumps({
            "id": "late", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "message": answer, "finish_reason": "stop"}],
        }).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_late_turn_plays_the_fallback_and_the_episode_goes_on(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FirstLate)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        out = tmp_path / "outputs"
        url = f"http://127.0.0.1:{server.server_port}/v1"
        proc = vf_eval(url, out, *SELECTION[:2], "--env.taskset.failure-type",
                       "misrouted_traffic", "-n", "1", "--env.turn-timeout", "6")  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ((trace,),) = [e["traces"] for e in episodes(out)]
    record = trace["info"]["chaosops"]
    first, *later = [s for s in record["steps"] if s["role"] == "sre"]
    assert first["timed_out"] and first["action"]["action_type"] == "noop"
    assert later and not any(s["timed_out"] for s in later)  # the seat goes on answering
    assert record["error"] is None
    assert trace["metrics"]["legal"] == pytest.approx(len(later) / (1 + len(later)))


def test_an_answer_that_is_no_move_plays_a_noop(tmp_path: Path) -> None:
    for url in _mock(tmp_path, "--rate-garbage", "1"):
        out = tmp_path / "outputs"
        proc = vf_eval(url, out, "--env.taskset.tier", "easy", "-n", "2")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        for episode in episodes(out):
            (trace,) = episode["traces"]
            turns = [s for s in trace["info"]["chaosops"]["steps"] if s["role"] == "sre"]
            assert all(s["parse_error"] and s["action"]["action_type"] == "noop" for s in turns)
            assert trace["metrics"]["legal"] == 0.0


TIER = "--env.taskset.tier[0] Input should be 'easy', 'medium' or 'hard' (got 'ultra')"
SEATS = "--env.models[0] Input should be 'sre', 'oversight', 'dev' or 'manager' (got 'ceo')"
OTHERS = "--env.others Input should be 'random', 'heuristic' or 'oracle' (got 'smart')"
DEADLINE = "--env.turn-timeout Input should be greater than 0 (got '0')"


@pytest.mark.parametrize(
    ("options", "messages"),
    [
        (("--env.taskset.tier", "ultra"), [TIER]),
        (("--env.models", "ceo", "--env.others", "smart", "--env.turn-timeout", "0"),
         [SEATS, OTHERS, DEADLINE]),
    ],
)  # fmt: skip
def test_bad_settings_are_refused_before_any_episode(
    options: tuple[str, ...], messages: list[str], tmp_path: Path
) -> None:
    proc = vf_eval("http://127.0.0.1:9/v1", tmp_path / "outputs", *options)
    assert proc.returncode != 0
    said = " ".join((proc.stdout + proc.stderr).replace("│", " ").split())
    assert all(message in said for message in messages), said[-2000:]
    assert not list((tmp_path / "outputs").glob("*/traces.jsonl"))
