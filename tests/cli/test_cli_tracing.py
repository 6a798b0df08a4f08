"""``--otlp-endpoint``: a run's episodes and turns as OpenTelemetry spans,
exported over OTLP/HTTP to a collector on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .otlp_collector import Collector, attributes
from .test_cli_e2e import (  # the module-scoped fixture work, and helpers
    _free_port,
    assert_one_error_line,
    chaosops,
    jsonl,
    work,  # noqa: F401
)


@pytest.fixture
def collector() -> Iterator[Collector]:
    collector = Collector()
    try:
        yield collector
    finally:
        collector.close()


def test_a_run_exports_a_span_per_episode_and_per_turn(
    work: Path,  # noqa: F811
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
    work: Path,  # noqa: F811
) -> None:
    out = work / "untraced"
    url = f"http://127.0.0.1:{_free_port()}"
    proc = chaosops("run", "--otlp-endpoint", url, "--out", out, cwd=work)
    assert proc.returncode == 1
    assert_one_error_line(proc, "--otlp-endpoint", f"{url}/v1/traces", "cannot reach")
    proc = chaosops("run", "--otlp-endpoint", "127.0.0.1:4318", "--out", out, cwd=work)
    assert proc.returncode == 2
    assert_one_error_line(proc, "--otlp-endpoint", "http://", "'127.0.0.1:4318'")
    assert not out.exists()


def test_an_endpoint_that_is_no_collector_is_refused(
    work: Path,  # noqa: F811
    collector: Collector,
) -> None:
    out = work / "not-a-collector"
    proc = chaosops("run", "--otlp-endpoint", f"{collector.url}/v1/logs", "--out", out, cwd=work)
    assert proc.returncode == 1
    assert_one_error_line(proc, "/v1/logs/v1/traces", "HTTP 404")
    assert not out.exists()
