"""Structured logs: JSON lines flushed as written, silent until configured."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from actors_toy import ToyEnv, act, instant_policies, run_kwargs

from actors import configure_logging, get_logger, log_enabled, run_episode, run_jobs
from actors._logging import reset_logging

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _clean_logging() -> Any:
    reset_logging()
    yield
    reset_logging()


async def test_unconfigured_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert not log_enabled()
    await run_episode(ToyEnv(steps=8), policies=instant_policies(), **run_kwargs())
    get_logger().info("should_not_print")
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


async def test_log_file_has_one_turn_line_per_step_readable_mid_run(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "run.jsonl"
    run_id = configure_logging(path, run_id="run-42")
    assert run_id == "run-42"
    mid_run: list[int] = []

    def peeking(obs: Any, role: str) -> Any:
        lines = path.read_text().splitlines()
        mid_run.append(sum(json.loads(line)["event"] == "turn" for line in lines))
        return act(role)

    async def job(n: int) -> Any:
        policies = instant_policies()
        policies["c"] = peeking
        return await run_episode(
            ToyEnv(steps=8),
            policies=policies,
            **run_kwargs(describe_turn=lambda r: {"step": r.next_observation.step}),
        )

    traces = await run_jobs(range(3), job, concurrency=1)
    assert mid_run == [2, 6, 10, 14, 18, 22]  # every earlier turn already on disk
    records = [json.loads(line) for line in path.read_text().splitlines()]
    turns = [r for r in records if r["event"] == "turn"]
    assert len(turns) == sum(len(t.turns) for t in traces) == 24
    expected = {
        "timestamp", "level", "event", "run_id", "episode_id", "turn", "step", "role",
        "reward", "done", "timed_out", "error", "latency_ms",
    }  # fmt: skip
    for record in turns:
        assert expected <= record.keys()
        assert record["run_id"] == "run-42" and record["level"] == "info"
        assert record["timestamp"].endswith("Z")
    events = [r["event"] for r in records]
    assert events[0] == "run_started" and events[-1] == "run_finished"
    assert events.count("episode_started") == events.count("episode_finished") == 3


async def test_stream_target_and_levels() -> None:
    stream = io.StringIO()
    configure_logging(stream, level="warning")
    assert not log_enabled()
    await run_episode(ToyEnv(steps=4), policies=instant_policies(), **run_kwargs())
    assert stream.getvalue() == ""
    get_logger().warning("careful", x=1)
    line = json.loads(stream.getvalue())
    assert line["event"] == "careful" and line["x"] == 1 and line["level"] == "warning"
    with pytest.raises(ValueError, match="level"):
        configure_logging(stream, level="loud")


async def test_pretty_console() -> None:
    stream = io.StringIO()
    configure_logging(stream, pretty=True)
    get_logger().info("hello", who="world")
    assert "hello" in stream.getvalue() and "who" in stream.getvalue()
