"""``--otlp-endpoint``: a run's episodes and turns as OpenTelemetry spans,
exported over OTLP/HTTP to a collector on loopback."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._cli import (
    TIMEOUT,
    assert_one_error_line,
    chaosops,
    cli_env,
    command,
    free_port,
    interrupt,
    jsonl,
    llm_run,
    mock_process,
    spawn,
)
from .otlp_collector import Collector, attributes


@pytest.fixture
def collector() -> Iterator[Collector]:
    collector = Collector()
    try:
        yield collector
    finally:
        collector.close()


def test_a_run_exports_a_span_per_episode_and_per_turn(
    work: Path,
    collector: Collector,
) -> None:
    out = work / "traced"
    proc = chaosops(
        "run", "tiny.toml", "--otlp-endpoint", collector.url, "--no-progress", "--out", out,
        cwd=work,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"OpenTelemetry traces to {collector.url}/v1/traces" in proc.stderr
    results = jsonl(out / "results.jsonl")
    # everything was sent before the command exited
    episodes = [s for s in collector.spans if s.name == "episode"]
    turns = [s for s in collector.spans if s.name == "turn"]
    assert len(episodes) == len(results) == 12
    assert len(turns) == sum(len(r["steps"]) for r in results)
    assert {r["service.name"] for r in collector.resources} == {"chaosops"}

    by_id = {attributes(s)["episode.id"]: s for s in episodes}
    for result in results:
        episode = by_id[result["episode_id"]]
        fields = attributes(episode)
        assert fields["episode.status"] == "ok"
        assert fields["episode.policy"] == "heuristic"
        assert fields["episode.failure_type"] == result["failure_type"]
        assert fields["episode.resolved"] == result["resolved"]
        assert fields["episode.cumulative_reward"] == pytest.approx(result["cumulative_reward"])
        mine = sorted(
            (attributes(t) for t in turns if t.parent_span_id == episode.span_id),
            key=lambda a: a["turn.index"],
        )
        assert [a["turn.role"] for a in mine] == [step["role"] for step in result["steps"]]
        assert [a["turn.reward"] for a in mine] == pytest.approx(
            [step["reward"] for step in result["steps"]]
        )
        assert all(
            t.trace_id == episode.trace_id for t in turns if t.parent_span_id == episode.span_id
        )


def test_an_unreachable_or_malformed_endpoint_is_one_line_before_anything_is_written(
    work: Path,
) -> None:
    out = work / "untraced"
    url = f"http://127.0.0.1:{free_port()}"
    proc = chaosops("run", "--otlp-endpoint", url, "--out", out, cwd=work)
    assert proc.returncode == 1
    assert_one_error_line(proc, "--otlp-endpoint", f"{url}/v1/traces", "cannot reach")
    for bad in ("127.0.0.1:4318", "http://", ""):
        proc = chaosops("run", "--otlp-endpoint", bad, "--out", out, cwd=work)
        assert proc.returncode == 2
        assert_one_error_line(proc, "--otlp-endpoint", "http://", repr(bad))
    assert not out.exists()


def test_an_endpoint_that_is_no_collector_is_refused(
    work: Path,
    collector: Collector,
) -> None:
    out = work / "not-a-collector"
    proc = chaosops("run", "--otlp-endpoint", f"{collector.url}/v1/logs", "--out", out, cwd=work)
    assert proc.returncode == 1
    assert_one_error_line(proc, "/v1/logs/v1/traces", "HTTP 404")
    assert not out.exists()


def _run_with_env(folder: Path, env: dict[str, str], *args: str | Path) -> Any:
    return subprocess.run(
        [command(), *map(str, args)],
        capture_output=True, text=True, cwd=folder, env={**cli_env(), **env}, timeout=TIMEOUT,
        check=False,
    )  # fmt: skip


def test_the_collectors_credentials_come_from_the_standard_variables(work: Path) -> None:
    collector = Collector(headers={"x-api-key": "s3cret"})
    try:
        out = work / "traced-with-key"
        proc = _run_with_env(work, {}, "run", "tiny.toml", "--otlp-endpoint", collector.url,
                             "--out", out)  # fmt: skip
        assert proc.returncode == 1
        assert_one_error_line(proc, "HTTP 401", "OTEL_EXPORTER_OTLP_HEADERS")
        assert not out.exists()
        proc = _run_with_env(
            work, {"OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=s3cret", "OTEL_SERVICE_NAME": "evals"},
            "run", "tiny.toml", "--otlp-endpoint", collector.url, "--no-progress", "--out", out,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert len([s for s in collector.spans if s.name == "episode"]) == 12
        assert {r["service.name"] for r in collector.resources} == {"evals"}
        assert "not delivered" not in proc.stderr
    finally:
        collector.close()


def test_a_collector_gone_mid_run_costs_a_bounded_wait_and_one_line(work: Path) -> None:
    collector = Collector()
    out = work / "traced-collector-gone"
    # One episode at a time, each answer 100 ms late: the run goes on for
    # seconds after its first episode's span arrives, so spans are still to be
    # sent when the collector goes. (Spans leave in batches, every second: with
    # the shared instant mock the batch holding the first episode could hold
    # the whole run, and nothing was left to fail.)
    with mock_process(work, "--latency", "100ms") as url:
        args = llm_run(work, url, out, "--otlp-endpoint", collector.url)
        args[args.index("--concurrency") + 1] = "1"
        proc = spawn(*args, cwd=work)
        try:
            deadline = time.monotonic() + TIMEOUT
            while time.monotonic() < deadline and not any(
                s.name == "episode" for s in collector.spans
            ):
                assert proc.poll() is None, "the run ended before the collector went away"
                time.sleep(0.05)
            collector.close()
            gone = time.monotonic()
            _, stderr = proc.communicate(timeout=TIMEOUT)
        finally:
            collector.close()
            if proc.poll() is None:
                interrupt(proc)
    assert proc.returncode == 0, stderr
    assert len(jsonl(out / "results.jsonl")) == 12  # the run itself is unaffected
    assert time.monotonic() - gone < 30  # generous: the run's rest plus at most ~10 s
    [lost] = [line for line in stderr.splitlines() if "not delivered" in line]
    assert lost.startswith("chaosops: OpenTelemetry: ") and collector.url in lost
    assert "Traceback" not in stderr and "Transient error" not in stderr


def test_a_parse_error_is_on_its_turn_span(
    work: Path,
    collector: Collector,
) -> None:
    with mock_process(work, "--rate-garbage", "1") as url:
        out = work / "traced-garbage"
        proc = chaosops(*llm_run(work, url, out, "--episodes-per-type", "1",
                                  "--otlp-endpoint", collector.url), cwd=work)  # fmt: skip
        assert proc.returncode == 1, proc.stderr  # no answer was a move
    turns = [attributes(s) for s in collector.spans if s.name == "turn"]
    assert turns and all(t.get("turn.parse_error") for t in turns)
    assert all(t["turn.action_type"] == "noop" for t in turns)


def test_credentials_in_the_endpoint_url_are_sent_and_never_shown(work: Path) -> None:
    import base64

    basic = "Basic " + base64.b64encode(b"user:s3cret-pw").decode()
    collector = Collector(headers={"Authorization": basic})
    try:
        url = collector.url.replace("http://", "http://user:s3cret-pw@")
        out = work / "traced-with-userinfo"
        proc = _run_with_env(work, {}, "run", "tiny.toml", "--otlp-endpoint", url,
                             "--no-progress", "--out", out)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert "s3cret-pw" not in proc.stdout + proc.stderr
        assert "user:***@" in proc.stderr
        assert len([s for s in collector.spans if s.name == "episode"]) == 12
        wrong = collector.url.replace("http://", "http://user:wrong-pw@")
        proc = _run_with_env(work, {}, "run", "tiny.toml", "--otlp-endpoint", wrong,
                             "--out", work / "traced-wrong-pw")  # fmt: skip
        assert_one_error_line(proc, "HTTP 401", "user:***@")
        assert "wrong-pw" not in proc.stderr
    finally:
        collector.close()
