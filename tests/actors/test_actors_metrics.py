"""Prometheus metrics: what a batch counts, serving them, and refusals."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from actors_toy import ROLES, ToyEnv, act, instant_policies, run_kwargs
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from actors import (
    EpisodeTrace,
    Meter,
    configure_metrics,
    current_meter,
    current_turn,
    run_episode,
    run_jobs,
)


@pytest.fixture
def meter() -> Iterator[Meter]:
    with configure_metrics(registry=CollectorRegistry(), namespace="t") as meter:
        yield meter
    assert current_meter() is None


def value(meter: Meter, name: str, **labels: str) -> float:
    """A sample's value; 0 when the series was never written."""
    return meter.registry.get_sample_value(f"t_{name}", labels) or 0.0


def test_metrics_are_off_until_configured() -> None:
    assert current_meter() is None


DEADLINE = 0.5
"""Role b's deadline: long enough that an instant answer meets it on a loaded machine."""


@pytest.mark.asyncio
async def test_a_batch_counts_episodes_turns_outcomes_latency_and_tokens(meter: Meter) -> None:
    async def hangs(obs: Any, role: str) -> Any:
        if obs.step == 1:  # turn 1 (role b) of every episode times out
            await anyio.sleep(10)
        return act(role)

    def raises(obs: Any, role: str) -> Any:
        if obs.step == 2:
            raise RuntimeError("broken")
        return "not an action" if obs.step == 6 else act(role)

    def talks(obs: Any, role: str) -> Any:
        current_turn().annotate(
            usage={"prompt_tokens": 100, "completion_tokens": 7},
            parse_error="no JSON" if obs.step == 3 else None,
        )
        return act(role)

    policies = {"a": instant_policies()["a"], "b": hangs, "c": raises, "d": talks}

    def policies_without_a(index: int) -> dict[str, Any]:
        # every other episode has no policy for role a: it plays its fallback
        return {k: v for k, v in policies.items() if k != "a" or index % 2}

    async def job(index: int) -> EpisodeTrace:
        return await run_episode(
            ToyEnv(steps=8),
            policies=policies_without_a(index),
            **run_kwargs(turn_timeout={"b": DEADLINE}),
        )

    traces = await run_jobs(range(6), job, concurrency=3)
    records = [r for t in traces for r in t.turns]
    assert len(records) == 48

    assert value(meter, "episodes_planned_total") == 6
    assert value(meter, "episodes_started_total") == 6
    assert value(meter, "episodes_finished_total", status="ok") == 6
    assert value(meter, "episodes_in_flight") == 0

    def counted(role: str, outcome: str) -> float:
        return value(meter, "turns_total", role=role, outcome=outcome)

    assert counted("a", "ok") == 6 and counted("a", "no_policy") == 6
    assert counted("b", "timed_out") == 6 and counted("b", "ok") == 6
    assert counted("c", "error") == 12  # a raise and a garbage return per episode
    assert counted("d", "ok") == 12
    outcomes = ("ok", "timed_out", "error", "no_policy")
    assert sum(counted(r, o) for r in ROLES for o in outcomes) == 48
    # latency: every turn a policy was asked for, none of the fallback's
    assert value(meter, "turn_latency_seconds_count", role="a") == 6
    assert value(meter, "turn_latency_seconds_count", role="b") == 12
    # the histogram holds each asked turn's recorded latency: an applied one's
    # is below its deadline, a timed-out one's is at least that
    asked_b = [r.latency_s for r in records if r.role == "b"]
    for bound in ("0.01", "0.05", "0.1", "0.3", "0.5", "1.0"):
        below = sum(latency <= float(bound) for latency in asked_b)
        assert value(meter, "turn_latency_seconds_bucket", role="b", le=bound) == below
    timed_out = [r.latency_s for r in records if r.role == "b" and r.timed_out]
    assert len(timed_out) == 6 and min(timed_out) >= DEADLINE - 0.002  # uvloop counts ms
    assert max(r.latency_s for r in records if r.role == "b" and not r.timed_out) < DEADLINE
    assert value(meter, "policy_tokens_total", role="d", type="input") == 1200
    assert value(meter, "policy_tokens_total", role="d", type="output") == 84
    assert value(meter, "parse_errors_total", role="d") == 6


@pytest.mark.asyncio
async def test_late_replies_failed_and_cancelled_episodes_are_counted(meter: Meter) -> None:
    async def shielded(obs: Any, role: str) -> Any:
        if obs.step == 0:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.1)
        return act(role)

    policies = instant_policies()
    policies["a"] = shielded
    await run_episode(ToyEnv(steps=8), policies=policies, **run_kwargs(turn_timeout={"a": 0.03}))
    assert value(meter, "late_replies_dropped_total", role="a") == 1

    failed = await run_episode(ToyEnv(fail_step=2), policies=instant_policies(), **run_kwargs())
    assert failed.status == "failed"
    assert value(meter, "episodes_finished_total", status="failed") == 1

    async def forever(obs: Any, role: str) -> Any:
        await anyio.sleep(60)

    with anyio.move_on_after(0.05):
        await run_episode(ToyEnv(), policies={"a": forever}, **run_kwargs())
    assert value(meter, "episodes_finished_total", status="cancelled") == 1
    assert value(meter, "episodes_started_total") == 3
    assert value(meter, "episodes_in_flight") == 0


def _scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {
        sample.name + repr(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.mark.asyncio
async def test_served_on_loopback_in_the_prometheus_text_format() -> None:
    registry = CollectorRegistry()
    with configure_metrics(0, registry=registry, namespace="served") as meter:
        assert meter.url == f"http://127.0.0.1:{meter.port}/metrics"
        await run_episode(ToyEnv(steps=8), policies=instant_policies(), **run_kwargs())
        samples = await anyio.to_thread.run_sync(_scrape, meter.url)
        assert samples["served_turns_total[('outcome', 'ok'), ('role', 'a')]"] == 2
        assert samples["served_episodes_finished_total[('status', 'ok')]"] == 1
    # closed: no longer served, no longer in the registry, no longer counting
    with pytest.raises(urllib.error.URLError):
        await anyio.to_thread.run_sync(_scrape, meter.url)
    assert registry.get_sample_value("served_episodes_started_total") is None
    await run_episode(ToyEnv(steps=4), policies=instant_policies(), **run_kwargs())
    assert registry.get_sample_value("served_episodes_started_total") is None


def test_configuring_again_replaces_the_previous_meter() -> None:
    registry = CollectorRegistry()
    first = configure_metrics(0, registry=registry, namespace="one")
    try:
        second = configure_metrics(registry=registry, namespace="one")
        assert current_meter() is second
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(first.url or "", timeout=5)  # first: closed
        second.close()
        assert current_meter() is None
    finally:
        first.close()


def test_a_taken_port_raises_and_leaves_nothing_behind() -> None:
    registry = CollectorRegistry()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError):
            configure_metrics(port, registry=registry, namespace="taken")
    assert current_meter() is None
    assert list(registry.collect()) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"port": -1}, "port must be an integer from 0 to 65535"),
        ({"port": "9000"}, "port must be an integer from 0 to 65535"),
        ({"port": True}, "port must be an integer from 0 to 65535"),
        ({"namespace": "my-runs"}, "namespace must be a name"),
        ({"labels": ("role",)}, "labels must be names"),
        ({"labels": ("my-policy",)}, "labels must be names"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        configure_metrics(registry=CollectorRegistry(), **kwargs)
    assert current_meter() is None


def test_application_metrics_join_the_namespace(meter: Meter) -> None:
    counter = meter.counter("resolved", "Resolved episodes.", ("kind",))
    assert meter.counter("resolved", "Resolved episodes.", ("kind",)) is counter
    counter.labels("x").inc(2)
    assert value(meter, "resolved_total", kind="x") == 2
    with pytest.raises(ValueError, match="already exists as a counter"):
        meter.gauge("resolved", "Resolved episodes.")
    with pytest.raises(ValueError, match="already exists as a counter"):
        meter.counter("resolved", "Resolved episodes.", ("other",))
    meter.close()
    assert value(meter, "resolved_total", kind="x") == 0
    with pytest.raises(RuntimeError, match="closed"):
        meter.counter("late", "Too late.")


@pytest.mark.asyncio
async def test_labelled_series_and_zeros_before_the_first_event() -> None:
    registry = CollectorRegistry()
    with configure_metrics(registry=registry, namespace="z", labels=("policy",)):

        async def job(index: int) -> EpisodeTrace:
            return await run_episode(
                ToyEnv(steps=4),
                policies=instant_policies(),
                log_fields={"policy": "one" if index < 2 else "two"},
                **run_kwargs(),
            )

        await run_jobs(range(2), job, concurrency=2, log_fields={"policy": "one"})
        await run_jobs(range(2, 5), job, concurrency=2, log_fields={"policy": "two"})

        def get(name: str, **labels: str) -> float | None:
            return registry.get_sample_value(f"z_{name}", labels)

        assert get("episodes_planned_total", policy="one") == 2
        assert get("episodes_planned_total", policy="two") == 3
        assert get("episodes_finished_total", policy="two", status="ok") == 3
        assert get("turns_total", policy="one", role="a", outcome="ok") == 2
        assert get("turns_total", policy="two", role="b", outcome="ok") == 3
        # series a dashboard plots exist, at 0, before anything happened to them
        assert get("turns_total", policy="one", role="a", outcome="timed_out") == 0
        assert get("episodes_finished_total", policy="one", status="failed") == 0
        assert get("late_replies_dropped_total", policy="two", role="c") == 0
        assert get("parse_errors_total", policy="two", role="d") == 0
