"""OpenTelemetry traces: an episode span, a turn span per step, the policy's
own spans nested in its turn, outcomes and failures, and tracing off."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from actors_toy import ROLES, ToyEnv, act, instant_policies, run_kwargs
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from actors import (
    configure_tracing,
    disable_tracing,
    in_thread,
    run_episode,
    run_jobs,
)
from actors._tracing import tracing_enabled


@pytest.fixture
def provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    configure_tracing(provider)
    try:
        yield provider, exporter
    finally:
        disable_tracing()
        provider.shutdown()


def by_name(spans: Any, name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def test_tracing_is_off_until_configured() -> None:
    assert not tracing_enabled()


@pytest.mark.asyncio
async def test_an_episode_span_with_a_turn_span_per_step_and_the_policys_spans_inside(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tracer_provider, exporter = provider
    tracer = tracer_provider.get_tracer("policy")

    async def traced(obs: Any, role: str) -> Any:
        with tracer.start_as_current_span("llm call"):
            await anyio.lowlevel.checkpoint()
        return act(role)

    def blocking(obs: Any, role: str) -> Any:
        with tracer.start_as_current_span("blocking call"):
            time.sleep(0.001)
        return act(role)

    policies = instant_policies()
    policies["a"] = traced
    policies["b"] = in_thread(blocking)
    del policies["d"]  # role d plays its fallback
    trace = await run_episode(
        ToyEnv(steps=8),
        policies=policies,
        log_fields={"difficulty": "easy", "seed": 7},
        describe_turn=lambda r: {"step": r.next_observation.step, "args": {"n": 1}},
        describe_finish=lambda env, t: {"applied": len(env.applied)},
        **run_kwargs(),
    )
    spans = exporter.get_finished_spans()
    [episode] = by_name(spans, "episode")
    assert episode.parent is None  # a trace of its own
    assert episode.attributes == {
        "episode.id": trace.episode_id,
        "episode.difficulty": "easy",
        "episode.seed": 7,
        "episode.applied": 8,
        "episode.status": "ok",
        "episode.timeouts": 0,
        "episode.errors": 0,
    }
    turns = by_name(spans, "turn")
    assert [t.attributes["turn.index"] for t in turns] == list(range(8))
    assert [t.attributes["turn.role"] for t in turns] == list(ROLES) * 2
    assert all(t.parent is not None and t.parent.span_id == episode.context.span_id for t in turns)
    assert all(t.context.trace_id == episode.context.trace_id for t in turns)
    assert turns[3].attributes == {
        "turn.index": 3, "turn.role": "d", "turn.step": 4, "turn.args": '{"n":1}',
        "turn.reward": 1.0, "turn.done": False, "turn.timed_out": False, "turn.latency_ms": 0.0,
    }  # fmt: skip
    # each policy's own span sits in the turn it played, also from a worker thread
    for name, role in (("llm call", "a"), ("blocking call", "b")):
        inner = by_name(spans, name)
        parents = {s.parent.span_id for s in inner if s.parent is not None}
        assert parents == {t.context.span_id for t in turns if t.attributes["turn.role"] == role}
        starts = {t.context.span_id: t.start_time for t in turns}
        assert all(s.parent is not None and starts[s.parent.span_id] <= s.start_time for s in inner)


@pytest.mark.asyncio
async def test_timeouts_errors_usage_and_late_replies(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    _, exporter = provider
    from actors import current_turn

    # a's deadline is 1 s and its first call answers after 2.5 s, shielded:
    # turn 0 closes at 1, turn 4 (asked at about 1) at 2 while that call still
    # runs, and turn 8 (asked at about 2) is answered at 2.5, before its
    # deadline: every margin is 0.5 s, more than a loaded machine's stalls
    async def slow(obs: Any, role: str) -> Any:
        if obs.step == 0:
            with anyio.CancelScope(shield=True):  # answers late, shielded
                await anyio.sleep(2.5)
        return act(role)

    def broken(obs: Any, role: str) -> Any:
        raise RuntimeError("no luck")

    def talks(obs: Any, role: str) -> Any:
        current_turn().annotate(usage={"prompt_tokens": 120, "completion_tokens": 9})
        return act(role)

    policies = {"a": slow, "b": broken, "c": talks, "d": instant_policies()["d"]}
    trace = await run_episode(
        ToyEnv(steps=24), policies=policies, **run_kwargs(turn_timeout={"a": 1.0})
    )
    spans = exporter.get_finished_spans()
    [episode] = by_name(spans, "episode")
    turns = by_name(spans, "turn")
    # turn 0 times out; so does turn 4, asked while a's shielded call still runs
    assert [t.attributes["turn.index"] for t in turns if t.attributes["turn.timed_out"]] == [0, 4]
    assert turns[0].attributes["turn.latency_ms"] >= 995  # uvloop's clock counts milliseconds
    assert turns[1].status.status_code is StatusCode.ERROR
    assert turns[1].attributes["turn.error"] == "RuntimeError: no luck"
    assert turns[1].status.description == "RuntimeError: no luck"
    assert turns[2].attributes["gen_ai.usage.input_tokens"] == 120
    assert turns[2].attributes["gen_ai.usage.output_tokens"] == 9
    assert episode.attributes["episode.timeouts"] == trace.timeouts == 2
    assert episode.attributes["episode.errors"] == trace.errors == 6
    assert episode.status.status_code is StatusCode.UNSET  # policy errors cost turns only
    # turn 0's answer comes late; on a loaded machine turn 4's may too, when
    # its request is taken only after the shielded call ends
    late = [dict(e.attributes or {}) for e in episode.events if e.name == "late_reply_dropped"]
    assert late[0] == {"turn.index": 0, "turn.role": "a"}
    assert all(e["turn.role"] == "a" and e["turn.index"] in (0, 4) for e in late)


@pytest.mark.asyncio
async def test_a_failed_or_cancelled_episode_ends_its_spans(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    _, exporter = provider
    await run_episode(ToyEnv(fail_step=2), policies=instant_policies(), **run_kwargs())
    spans = exporter.get_finished_spans()
    [episode] = by_name(spans, "episode")
    assert episode.attributes["episode.status"] == "failed"
    assert episode.status.status_code is StatusCode.ERROR
    assert episode.status.description == "ValueError: step 2 broke"
    turns = by_name(spans, "turn")
    assert len(turns) == 3  # two applied, the third ended with the error
    assert turns[2].status.description == "ValueError: step 2 broke"
    exporter.clear()

    async def forever(obs: Any, role: str) -> Any:
        await anyio.sleep(60)

    with anyio.move_on_after(0.05):
        await run_episode(ToyEnv(), policies={"a": forever}, **run_kwargs())
    spans = exporter.get_finished_spans()
    [episode] = by_name(spans, "episode")
    assert episode.attributes["episode.status"] == "cancelled"
    [turn] = by_name(spans, "turn")
    # a caller's cancellation is no error of the turn's: no ERROR on dashboards
    assert turn.status.status_code is StatusCode.UNSET and turn.end_time is not None
    assert turn.attributes["turn.abandoned"] is True


@pytest.mark.asyncio
async def test_concurrent_episodes_keep_their_turns_apart_under_the_callers_span(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    tracer_provider, exporter = provider

    async def job(index: int) -> Any:
        async def policy(obs: Any, role: str) -> Any:
            await anyio.sleep(0.001 * (index % 3))
            return act(role)

        return await run_episode(
            ToyEnv(steps=8), policies=dict.fromkeys(ROLES, policy), **run_kwargs()
        )

    with tracer_provider.get_tracer("app").start_as_current_span("evaluation") as root:
        traces = await run_jobs(range(12), job, concurrency=8)
    spans = exporter.get_finished_spans()
    episodes = {s.attributes["episode.id"]: s for s in by_name(spans, "episode")}
    assert set(episodes) == {t.episode_id for t in traces}
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id
               for s in episodes.values())  # fmt: skip
    children: dict[int, list[int]] = {}
    for turn in by_name(spans, "turn"):
        assert turn.parent is not None
        children.setdefault(turn.parent.span_id, []).append(turn.attributes["turn.index"])
    assert {s.context.span_id for s in episodes.values()} == set(children)
    assert all(sorted(indices) == list(range(8)) for indices in children.values())


@pytest.mark.asyncio
async def test_disabled_tracing_makes_no_spans(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    _, exporter = provider
    disable_tracing()
    assert not tracing_enabled()
    await run_episode(ToyEnv(steps=4), policies=instant_policies(), **run_kwargs())
    assert exporter.get_finished_spans() == ()


def test_without_opentelemetry_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(ImportError, match=r"pip install 'chaosops\[otel\]'"):
        configure_tracing()
    assert not tracing_enabled()


@pytest.mark.parametrize("provider", ["x", 3])
def test_something_that_is_no_tracer_provider_is_refused(provider: Any) -> None:
    with pytest.raises(TypeError, match="must be an OpenTelemetry TracerProvider"):
        configure_tracing(provider)
    assert not tracing_enabled()
