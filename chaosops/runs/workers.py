"""Batches of episodes on a Ray cluster (:mod:`actors.cluster`): the job each
worker builds, and the driver's count of what the workers played.

A worker gets a :class:`EpisodeJob`: picklable, holding what to build the
policies from (a factory, or a recipe such as the CLI's LLM settings), never a
live client. It plays each scenario with :func:`arun_episode` in the worker's
event loop, so deadlines are enforced there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass, fields
from functools import partial
from typing import Any

import actors
from actors.cluster import ClusterOptions, connect, import_ray, open_cluster_jobs
from chaosops._otlp import exporting_provider, otlp_exporter
from chaosops.agents.llm.render import build_messages
from chaosops.agents.runner import EpisodeResult, arun_episode, count_episode, role_map_of
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.outputs import episode_lines

__all__ = [
    "ClusterOptions",
    "EpisodeJob",
    "Outputs",
    "WrittenResult",
    "arun_batch",
    "count_result",
    "open_cluster_batch",
    "run_batch",
    "run_on_cluster",
]


@dataclass(frozen=True)
class EpisodeJob:
    """What a worker plays episodes with: ``make_policies()`` (called once in
    the worker) gives a role map or a factory ``scenario -> role map``."""

    make_policies: Callable[[], Any]
    turn_timeout: Any = None
    fields: Mapping[str, Any] | None = None
    traces_url: str | None = None  # spans exported from the worker, over OTLP/HTTP
    outputs: Outputs | None = None  # the worker makes the output lines (items: scenario, key)
    env_factory: Callable[[], Any] = ChaosOpsEnvironment  # a fresh environment an episode

    def __call__(self) -> _Played:
        tracer = _export_spans(self.traces_url) if self.traces_url else None
        return _Played(self.make_policies(), self.turn_timeout, dict(self.fields or {}),
                       tracer, self.outputs, self.env_factory)  # fmt: skip


@dataclass(frozen=True)
class Outputs:
    """What a worker needs to make an episode's output lines: the policy its
    records name and what played each role (see chaosops.outputs)."""

    policy: str
    roles: Mapping[str, Any] | None = None


@dataclass(slots=True, eq=False)
class WrittenResult(EpisodeResult):
    """An episode a worker played, with its output lines made there
    (``trajectories.jsonl`` lines, ``results.jsonl`` line) and its steps kept
    as far as the driver reads them (role, outcome, latency, usage): the
    driver appends the lines as they are."""

    lines: tuple[bytes, bytes] = (b"", b"")


class _Played:
    """The job in the worker: one episode per call, on a fresh environment."""

    def __init__(
        self,
        policies: Any,
        turn_timeout: Any,
        fields: dict[str, Any],
        tracer: Any = None,
        outputs: Outputs | None = None,
        env_factory: Callable[[], Any] = ChaosOpsEnvironment,
    ) -> None:
        self.policies = policies
        self.turn_timeout = turn_timeout
        self.fields = fields
        self.tracer = tracer  # the worker's TracerProvider, flushed when it closes
        self.outputs = outputs  # set: items are (scenario, key), lines made here
        self.env_factory = env_factory

    async def __call__(self, item: Any) -> Any:

        scenario, key = item if self.outputs is not None else (item, None)
        result = await arun_episode(
            self.env_factory(),
            scenario,
            role_map_of(self.policies, scenario),
            turn_timeout=self.turn_timeout,
            fields=self.fields,
        )
        if self.outputs is None:
            _render_prompts(result)
            return result
        return _written(result, str(key), self.outputs, self.turn_timeout)

    async def aclose(self) -> None:
        close = getattr(self.policies, "aclose", None)
        if close is not None:
            await close()
        if self.tracer is not None:
            self.tracer.shutdown()  # what is queued is sent first


def _export_spans(url: str) -> Any:
    """Episodes and turns traced in this worker, exported to ``url`` (the
    driver checked that it answers) as the driver exports its own."""

    provider = exporting_provider(otlp_exporter(url))
    actors.configure_tracing(provider, name="chaosops")
    return provider


def _written(result: EpisodeResult, key: str, outputs: Outputs, turn_timeout: Any) -> Any:
    """``result`` with its output lines made here, in the worker: the driver's
    CPU is what all the workers share."""

    trajectory, results_line, _ = episode_lines(
        result, policy=outputs.policy, key=key, render=build_messages,
        turn_timeout=turn_timeout, roles=outputs.roles,
    )  # fmt: skip
    for step in result.steps:  # what the driver still reads: roles, outcomes, usage
        # stripped for the trip to the driver, which reads only what is kept here
        step.observation = step.action = step.breakdown = None  # type: ignore[assignment]
        info = step.info or {}
        step.info = {k: info[k] for k in ("usage", "parse_error") if k in info}
    kept = {f.name: getattr(result, f.name) for f in fields(EpisodeResult)}
    return WrittenResult(**kept, lines=(trajectory, results_line))


def _render_prompts(result: Any) -> None:
    """Each step's prompt rendered here, in the worker, where the driver would
    render it for trajectories.jsonl (the driver's CPU is what all the workers
    share)."""

    for step in result.steps:
        info = step.info or {}
        if info.get("prompt") is None:
            try:
                step.info = {**info, "prompt": build_messages(step.observation, step.role)}
            except Exception:  # the driver renders it again, and reports a failure
                continue


def count_result(result: Any, fields: Mapping[str, Any] | None) -> None:
    """Count an episode a worker played in this process's metrics (the
    driver's Prometheus endpoint counts every worker's episodes and turns)."""

    meter = actors.current_meter()
    if meter is None:
        return
    episode = meter.episode(fields)
    for step in result.steps:
        outcome = "timed_out" if step.timed_out else ("ok" if step.error is None else "error")
        episode.turn(step.role, outcome, step.latency_s, step.info)
    episode.finished(result.status)
    if result.status == "ok":
        count_episode(meter, result, fields or {})


@asynccontextmanager
async def open_cluster_batch(
    scenarios: Sequence[Any],
    job: EpisodeJob,
    options: ClusterOptions,
    *,
    concurrency: int,
    on_pids: Callable[[list[int]], None] | None = None,
) -> AsyncIterator[_Counted]:
    """:func:`chaosops.agents.runner.open_batch` on the connected cluster:
    ``(index, result)`` as episodes finish, counted in this process's metrics."""
    ray = import_ray()
    workers = options.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
    async with open_cluster_jobs(
        scenarios, job, workers=workers, concurrency=concurrency,
        failed=lambda result: result.status != "ok", on_pids=on_pids, log_fields=job.fields,
    ) as results:  # fmt: skip
        yield _Counted(results, job.fields)


class _Counted:
    """The workers' results, each counted in the metrics as it is read."""

    def __init__(self, results: actors.JobResults[Any], fields: Mapping[str, Any] | None) -> None:
        self._results = results
        self._fields = fields

    def __getattr__(self, name: str) -> Any:  # total, started, finished, in_flight...
        return getattr(self._results, name)

    def __aiter__(self) -> _Counted:
        return self

    async def __anext__(self) -> tuple[int, Any]:
        index, result = await self._results.__anext__()
        count_result(result, self._fields)
        return index, result


async def arun_batch(
    scenarios: Iterable[Any],
    policies: Any,
    *,
    cluster: ClusterOptions,
    concurrency: int = 64,
    turn_timeout: Any = None,
    fields: Mapping[str, Any] | None = None,
    env_factory: Callable[[], Any] = ChaosOpsEnvironment,
) -> list[Any]:
    """:func:`chaosops.agents.runner.arun_batch` on Ray worker actors: results
    in the order of ``scenarios``. ``policies`` (a role map or a factory) and
    ``env_factory`` are pickled to each worker: a factory that makes its
    clients when called ships well, a live client does not. This process
    connects for the batch unless it is connected already."""
    listed = list(scenarios)
    job = EpisodeJob(partial(_given, policies), turn_timeout, fields, env_factory=env_factory)
    results: list[Any] = [None] * len(listed)
    with run_on_cluster(cluster):
        async with open_cluster_batch(listed, job, cluster, concurrency=concurrency) as stream:
            async for index, result in stream:
                results[index] = result
    return results


def run_batch(
    scenarios: Iterable[Any],
    policies: Any,
    *,
    cluster: ClusterOptions,
    concurrency: int = 64,
    turn_timeout: Any = None,
    fields: Mapping[str, Any] | None = None,
    env_factory: Callable[[], Any] = ChaosOpsEnvironment,
) -> list[Any]:
    """Synchronous :func:`arun_batch`."""
    play = partial(arun_batch, scenarios, policies, cluster=cluster, concurrency=concurrency,
                   turn_timeout=turn_timeout, fields=fields, env_factory=env_factory)  # fmt: skip
    return actors.run(play)


def _given(policies: Any) -> Any:
    return policies


def run_on_cluster(options: ClusterOptions) -> Any:
    """The connection for a batch (:func:`actors.cluster.connect`), unless
    this process is connected already."""
    ray = import_ray()
    if ray.is_initialized():
        return nullcontext(ray)
    return connect(options.address)
