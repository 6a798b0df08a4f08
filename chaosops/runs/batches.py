"""Batch execution: planned episodes grouped into runner batches, run one after
the other, stopped cleanly by SIGINT or SIGTERM."""

from __future__ import annotations

import dataclasses
import signal
from array import array
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from chaosops.agents.runner import open_batch
from chaosops.runs.workers import EpisodeJob, Outputs, open_cluster_batch

from .errors import Message, Named
from .plan import Plan, PlanSlice, timeout_groups
from .session import Session
from .spec import Deadlines, TurnTimeout
from .stopping import hold_signals

if TYPE_CHECKING:
    from actors import JobResults


@dataclasses.dataclass
class Stop:
    """Which signal stopped the batch, if any, or why it was given up."""

    signum: int | None = None
    reason: Message | None = None  # a health check's: the LLM endpoint went away
    # Episodes that finished with errored turns while the endpoint was failing,
    # not handed over because the failures stopped the run (see run_batches).
    withheld: int = 0


@dataclasses.dataclass
class Batch:
    """One call to the runner: scenarios sharing a deadline, with their plan
    indices; ``tag``, the policy's name, is the batch's ``policy`` field (in
    its log events, spans and metric labels), ``model`` the LLM models some
    role asks (``alpha``, ``alpha+beta``; empty for scripted roles)."""

    scenarios: Sequence[Any]  # made as the runner asks (a PlanSlice)
    indices: Sequence[int]
    factory: Callable[[Any], Mapping[Any, Any]]
    turn_timeout: TurnTimeout
    tag: str = ""
    model: str = ""  # the LLM models its roles ask, as the metrics' "model" label
    remote: Remote | None = None  # what Ray workers need (with --ray)


@dataclasses.dataclass(frozen=True)
class Remote:
    """What a batch's Ray workers need: the recipe of the role maps
    (:class:`PolicyRecipe`), the run keys and what played (the workers make
    the output lines), and where their spans go (``--otlp-endpoint``)."""

    recipe: Any
    keys: Any  # the play's PlanKeys
    roles: Mapping[str, Any] | None = None
    traces_url: str | None = None


def plan_batches(
    deadlines: Deadlines,
    plan: Plan,
    done: Sequence[int],
    factory: Callable[[Any], Mapping[Any, Any]],
    tag: str = "",
    model: str = "",
    remote: Remote | None = None,
) -> list[Batch]:
    """The batches running the plan indices not ``done`` (a flag per index):
    one per deadline group of :func:`timeout_groups`, in its order, indices
    ascending within each."""
    batches = []
    for spans, timeout in timeout_groups(deadlines, plan):
        kept = array("q", (i for span in spans for i in span if not done[i]))
        if kept:
            slice_ = PlanSlice(plan, kept)
            batches.append(Batch(slice_, kept, factory, timeout, tag, model, remote))
    return batches


async def _watch_signals(scope: Any, stop: Stop) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            stop.signum = int(signum)
            scope.cancel()
            break
    # leaving the receiver gave the signals back to Python's own handlers, under
    # which another Ctrl-C would raise in the middle of the clean stop
    hold_signals()


async def _watch_health(scope: Any, stop: Stop, check: Callable[[], Message | None]) -> None:

    while (reason := check()) is None:  # noqa: ASYNC110 - a counter, polled
        await anyio.sleep(HEALTH_EVERY_S)
    stop.reason = reason
    scope.cancel()


HEALTH_EVERY_S = 0.1
"""How often :func:`run_batches` asks its ``health`` check."""


class _Delivery:
    """Hands results over, holding back those that finished with errored turns
    while the endpoint was failing (see :func:`run_batches`)."""

    def __init__(
        self, on_result: Callable[[Batch, int, Any], None], failing: Callable[[], bool] | None
    ) -> None:
        self.on_result = on_result
        self.failing = failing
        self.held: list[tuple[Batch, int, Any]] = []

    def deliver(self, batch: Batch, index: int, result: Any) -> None:
        if self.failing is not None:
            if self.failing():
                if result.errors:
                    self.held.append((batch, index, result))
                    return
            else:
                self.release()
        self.on_result(batch, index, result)

    def release(self) -> None:
        while self.held:
            self.on_result(*self.held.pop(0))


async def run_batches(
    batches: Sequence[Batch],
    *,
    session: Session | None = None,
    concurrency: int,
    on_result: Callable[[Batch, int, Any], None],
    on_batch: Callable[[JobResults[Any] | None], None] | None = None,
    close: Sequence[Any] = (),
    health: Callable[[], Message | None] | None = None,
    failing: Callable[[], bool] | None = None,
    cluster: Any = None,
    observe: Callable[[Batch, Any], None] | None = None,
    signals: bool = True,
) -> Stop:
    """Run the batches one after the other, calling ``on_result(batch, plan_index,
    result)`` as each episode finishes.

    ``on_batch(results)`` gets each batch's live counters (the runner's
    ``actors.JobResults``: ``in_flight``, ``started``, ``finished``...) as it
    opens, and ``None`` once the batches are over (also when stopped).

    With ``signals``, SIGINT or SIGTERM cancels the batch in flight (its
    episodes are cancelled by structured cancellation; what finished was
    already handed to ``on_result``), and the signals after it only say to
    wait (see :mod:`.stopping`): for a command, which owns its process.
    The objects in ``close`` (LLM policies) are closed at the end, in this loop.
    ``health`` is asked at each result and every :data:`HEALTH_EVERY_S`: a
    reason (not None) stops the batches as a signal would, and becomes the
    :class:`Stop`'s ``reason``. ``observe(batch, result)`` sees each result
    first (under ``--ray``, :class:`TurnFailures` counts it).

    ``failing()`` says whether the endpoint is in a run of failed calls (the
    LLM policy's ``failures_in_a_row``). An episode that finishes with errored
    turns during such a run is held back: handed to ``on_result`` once a call
    succeeds again (or the batches end), but not at all when the run of
    failures stops the batches (``health``): its fallback turns are the
    outage's, not the policy's, and ``--resume`` plays it again. The
    :class:`Stop` counts them (``withheld``).
    """

    session = session or Session()
    stop = Stop()
    delivery = _Delivery(on_result, failing)
    try:
        async with anyio.create_task_group() as tg:
            session.running.append((tg.cancel_scope, stop))
            if signals:
                tg.start_soon(_watch_signals, tg.cancel_scope, stop)
            if health is not None:
                tg.start_soon(_watch_health, tg.cancel_scope, stop, health)
            for batch in batches:
                async with _open(batch, concurrency, cluster) as results:
                    if on_batch is not None:
                        on_batch(results)
                    async for index, result in results:
                        if observe is not None:  # before delivery asks whether calls fail
                            observe(batch, result)
                        # at each result, not only at the poll: results may come together
                        if health is not None and (reason := health()) is not None:
                            stop.reason = reason
                            tg.cancel_scope.cancel()
                            break
                        delivery.deliver(batch, batch.indices[index], result)
            tg.cancel_scope.cancel()
        if stop.reason is None:
            delivery.release()  # the failures did not stop the run: they were the policy's turns
        stop.withheld = len(delivery.held)
    finally:
        session.running[:] = [(scope, st) for scope, st in session.running if st is not stop]
        if on_batch is not None:
            on_batch(None)
        with anyio.CancelScope(shield=True):
            for resource in close:
                await resource.aclose()
    return stop


def _open(batch: Batch, concurrency: int, cluster: Any) -> Any:
    """The batch's stream of results: in this process, or on the Ray workers of
    ``cluster`` (a ClusterOptions; this process connected to it)."""
    fields = {"policy": batch.tag, "model": batch.model} if batch.tag else None
    if cluster is None:
        # the command owns its process: it keeps its results out of the
        # collector's sight (gc.freeze) while the batches run
        return open_batch(batch.scenarios, batch.factory, concurrency=concurrency,
                          turn_timeout=batch.turn_timeout, fields=fields,
                          gc_freeze=True)  # fmt: skip
    remote = batch.remote
    assert remote is not None, "a batch for Ray workers is planned with their Remote"
    outputs = Outputs(batch.tag, remote.roles)
    job = EpisodeJob(remote.recipe, batch.turn_timeout, fields, remote.traces_url, outputs)
    items = _Keyed(batch.scenarios, batch.indices, remote.keys)
    return open_cluster_batch(items, job, cluster, concurrency=concurrency)


class _Keyed(Sequence[Any]):
    """A batch's ``(scenario, run key)`` pairs, made as the dispatcher asks."""

    def __init__(self, scenarios: Sequence[Any], indices: Sequence[int], keys: Any) -> None:
        self.scenarios = scenarios
        self.indices = indices  # the scenarios' plan indices, where their keys are
        self.keys = keys

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, index: Any) -> Any:
        return self.scenarios[index], self.keys[self.indices[index]]


async def aexecute(
    batches: Sequence[Batch],
    session: Session,
    *,
    concurrency: int,
    on_result: Callable[[Batch, int, Any], None],
    progress: Any,
    llms: Sequence[Any] = (),
    max_failures: int = 0,
    cluster: Any = None,
    llm_roles: Mapping[str, set[str]] | None = None,
    max_policy_errors: int | float | None = None,
    signals: bool = True,
) -> Stop:
    """:func:`run_batches` shown on ``progress`` (a ``ProgressBar``), closing
    the LLM policies at the end, and stopping once ``max_failures`` (> 0)
    calls in a row of one of them failed for good. On ``cluster`` the calls
    are the workers': the LLM turns (the roles ``llm_roles`` names by batch
    tag) that failed in a row are counted instead, in the results as they
    come (:class:`TurnFailures`). ``max_policy_errors`` stops the run on any
    policy's errors (:class:`PolicyErrors`); ``signals``, on SIGINT and SIGTERM."""

    session.ran = True
    health, failing = _endpoint_health(llms, max_failures), None
    observe: Callable[[Batch, Any], None] | None = None
    if health is not None:  # held back only where a run of failures can stop the batches
        failing = lambda: any(llm.failures_in_a_row > 0 for llm in llms)  # noqa: E731
    if cluster is not None:
        failures = TurnFailures(llm_roles or {})
        health = failures.check(max_failures) if llms and max_failures > 0 else None
        failing = (lambda: failures.in_a_row > 0) if health is not None else None
        observe = failures.observe
    if max_policy_errors is not None:
        errors = PolicyErrors(max_policy_errors)
        health = _either(health, errors.check)
        observe = _both(observe, errors.observe)
    with progress:
        return await run_batches(
            batches, session=session, concurrency=concurrency, on_result=on_result,
            on_batch=progress.watch, close=list(llms), health=health, failing=failing,
            cluster=cluster, observe=observe, signals=signals,
        )  # fmt: skip


class TurnFailures:
    """The LLM turns that failed in a row, counted in the results as they come
    (under ``--ray``, where the calls are the workers' own)."""

    def __init__(self, llm_roles: Mapping[str, set[str]]) -> None:
        self.llm_roles = llm_roles  # batch tag -> the roles an LLM plays
        self.in_a_row = 0
        self.last = ""

    def observe(self, batch: Batch, result: Any) -> None:
        roles = self.llm_roles.get(batch.tag, set())
        for step in result.steps:
            if str(step.role) not in roles:
                continue
            if step.timed_out or step.error is not None:
                self.in_a_row += 1
                self.last = step.error or "timed out"
            else:
                self.in_a_row = 0

    def check(self, max_failures: int) -> Callable[[], Message | None]:
        def reason() -> Message | None:
            if self.in_a_row < max_failures:
                return None
            return Message(
                f"{self.in_a_row} model turns in a row failed on the Ray workers (last: "
                f"{self.last}): stopped by ",
                Named("llm_max_failures", max_failures),
            )

        return reason


class PolicyErrors:
    """Turns that failed with a policy error (not a timeout), whatever the
    policy, counted in the results as they come: ``limit`` in a row (an int),
    or a share of the turns played (a float, judged from the 100th turn on)."""

    JUDGED_FROM = 100

    def __init__(self, limit: int | float) -> None:
        self.limit = limit
        self.in_a_row = self.errors = self.turns = 0
        self.last = ""

    def observe(self, batch: Batch, result: Any) -> None:
        for step in result.steps:
            self.turns += 1
            if step.error is not None and not step.timed_out:
                self.errors += 1
                self.in_a_row += 1
                self.last = f"{step.role}: {step.error}"
            else:
                self.in_a_row = 0

    def check(self) -> Message | None:
        limit = self.limit
        if isinstance(limit, int):
            if self.in_a_row < limit:
                return None
            said = f"{self.in_a_row} turns in a row failed with a policy error"
            return Message(
                f"{said} (last: {self.last}): stopped by ", Named("max_policy_errors", limit)
            )
        if self.turns < self.JUDGED_FROM or self.errors < limit * self.turns:
            return None
        return Message(
            f"{self.errors} of {self.turns} turns failed with a policy error (last: "
            f"{self.last}): stopped by ",
            Named("max_policy_errors", f"{limit:.0%}"),
        )


def _either(*checks: Callable[[], Message | None] | None) -> Callable[[], Message | None]:
    """A health check: the first reason any of ``checks`` gives."""
    given = [check for check in checks if check is not None]
    return lambda: next((r for check in given if (r := check()) is not None), None)


def _both(*observers: Callable[[Batch, Any], None] | None) -> Callable[[Batch, Any], None]:
    given = [observe for observe in observers if observe is not None]

    def observe(batch: Batch, result: Any) -> None:
        for each in given:
            each(batch, result)

    return observe


def _endpoint_health(llms: Sequence[Any], max_failures: int) -> Callable[[], Message | None] | None:
    # The model policies' failures in a row (chaosops.agents.model.ModelPolicy).
    if not llms or max_failures <= 0:
        return None

    def check() -> Message | None:
        for llm in llms:
            if llm.failures_in_a_row >= max_failures:
                return Message(  # the last failure names the model and its endpoint
                    f"{llm.failures_in_a_row} {llm.calls} in a row failed for good (last: "
                    f"{llm.last_failure}): stopped by ",
                    Named("llm_max_failures", max_failures),
                )
        return None

    return check


def withheld_note(stop: Stop) -> str:
    """`` (N more played while the endpoint failed, not kept)``, or nothing."""
    if not stop.withheld:
        return ""
    return f" ({stop.withheld} more played while the endpoint failed, not kept)"


def stop_code(stop: Stop) -> int:
    """The exit code of a stopped run: 128 + the signal (130 SIGINT, 143 SIGTERM,
    141 SIGPIPE: stdout closed while JSON logs went there)."""
    return 128 + (stop.signum or signal.SIGINT)
