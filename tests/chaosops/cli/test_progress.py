"""The progress bar shows the exact number of episodes in flight, read live from
the running batch's counters (``actors.JobResults``)."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from rich.console import Console

from actors import JobResults
from chaosops.cli._progress import ProgressBar
from chaosops.curriculum.generator import scenarios_for_tier
from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction
from chaosops.runs.batches import Batch, run_batches


class FakeResults:
    """The counters of ``actors.JobResults`` that the bar reads."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.started = 0
        self.finished = 0

    @property
    def in_flight(self) -> int:
        return self.started - self.finished


def finished(*, timeouts: int = 0, errors: int = 0, status: str = "ok") -> Any:
    return SimpleNamespace(timeouts=timeouts, errors=errors, status=status, steps=[])


def test_in_flight_follows_the_batch_counters_without_a_result() -> None:
    bar = ProgressBar(enabled=False, total=10, label="t")
    assert bar.in_flight == 0 and "in flight 0 " in bar.stats()
    fake = FakeResults(total=10)
    bar.watch(fake)  # type: ignore[arg-type]
    fake.started = 3
    assert bar.in_flight == 3 and "in flight 3 " in bar.stats()
    fake.started, fake.finished = 7, 2  # two finished, not read yet
    assert "in flight 5 " in bar.stats()
    bar.advance(finished(timeouts=2, errors=1, status="failed"))
    assert bar.stats().startswith("in flight 5 · timeouts 2 · errors 1 · ")
    assert bar.stats().endswith(" ep/s · failed 1")
    bar.watch(None)
    assert "in flight 0 " in bar.stats()


def test_the_drawn_bar_reads_the_counters_when_drawn() -> None:
    out = io.StringIO()
    bar = ProgressBar(
        enabled=True, total=10, label="heuristic", console=Console(file=out, width=200)
    )
    fake = FakeResults(total=10)
    with bar:
        bar.watch(fake)  # type: ignore[arg-type]
        bar.advance(finished())
        fake.started, fake.finished = 5, 1  # changed after the last result
    line = out.getvalue().strip().splitlines()[-1]
    assert "heuristic" in line and "1/10" in line
    assert "in flight 4 · timeouts 0 · errors 0 · " in line and "ep/s" in line


def test_disabled_bar_draws_nothing() -> None:
    out = io.StringIO()
    with ProgressBar(enabled=False, total=3, label="t", console=Console(file=out)) as bar:
        bar.advance(finished())
    assert out.getvalue() == ""


class Gate:
    """An SRE policy that holds every episode at its first turn until opened."""

    def __init__(self, episodes: int) -> None:
        self.episodes = episodes
        self.waiting = 0
        self.all_waiting = anyio.Event()
        self.open = anyio.Event()

    async def policy(self, obs: Any, role: AgentRole) -> ChaosOpsAction:
        if not self.open.is_set():
            self.waiting += 1
            if self.waiting == self.episodes:
                self.all_waiting.set()
            await self.open.wait()
        return ChaosOpsAction(role=role, action_type=ActionType.NOOP)

    def factory(self, scenario: Any) -> dict[AgentRole, Any]:
        return {AgentRole.SRE: self.policy}


@pytest.mark.asyncio
async def test_run_batches_hands_each_batch_counters_to_the_bar() -> None:
    """Two batches (as two deadline groups give): while the first one's single
    episode runs, the bar says 1 in flight, not min(concurrency, remaining) = 2;
    then 2 while the second batch runs both of its episodes; 0 at the end."""
    first, second = Gate(1), Gate(2)
    scenarios = scenarios_for_tier("easy", episodes_per_type=1)[:3]
    batches = [
        Batch(scenarios[:1], [0], first.factory, None),
        Batch(scenarios[1:], [1, 2], second.factory, None),
    ]
    bar = ProgressBar(enabled=False, total=3, label="t")
    seen: list[JobResults[Any] | None] = []
    running: list[tuple[int, int]] = []  # (in flight, done) while a batch is held

    def on_batch(results: JobResults[Any] | None) -> None:
        seen.append(results)
        bar.watch(results)

    async def release_in_turn() -> None:
        with anyio.fail_after(5):
            for gate in (first, second):
                await gate.all_waiting.wait()
                running.append((bar.in_flight, bar.done))
                gate.open.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(release_in_turn)
        stop = await run_batches(
            batches,
            concurrency=2,
            on_result=lambda batch, index, result: bar.advance(result),
            on_batch=on_batch,
        )
    assert stop.signum is None
    assert running == [(1, 0), (2, 1)]
    assert [r.total for r in seen[:2] if r is not None] == [1, 2]
    assert len(seen) == 3 and seen[-1] is None
    assert bar.done == 3 and bar.in_flight == 0


def test_trouble_sums_up_policy_errors_and_unread_answers() -> None:
    def step(error: str | None = None, parse: str | None = None, late: bool = False) -> Any:
        info = {"parse_error": parse} if parse else {}
        return SimpleNamespace(error=error, timed_out=late, info=info, role="dev")

    def result(*steps: Any) -> Any:
        errors = sum(1 for s in steps if s.error)
        return SimpleNamespace(steps=list(steps), errors=errors, timeouts=0, status="ok")

    bar = ProgressBar(enabled=False, total=3, label="t")
    assert bar.trouble() == []
    bar.advance(result(step(), step(parse="empty answer"), step(parse="late", late=True)))
    bar.advance(result(step(error="LLMRequestError: HTTP 500\n" + "x" * 300), step()))
    bar.advance(result(step(error="ValueError: second"), step(parse="no JSON action")))
    errors, unread = bar.trouble()
    assert errors.startswith("2 turn(s) (dev 2) played the fallback after a policy error or "
                             "a failed LLM call (first: LLMRequestError: HTTP 500 x")  # fmt: skip
    assert "\n" not in errors and "..." in errors and "second" not in errors
    assert unread.startswith("2 answer(s) could not be read") and "empty answer" in unread
