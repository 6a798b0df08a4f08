"""Run ChaosOps episodes: the seed-compatible API on top of the ``actors`` runtime.

Every role of an episode is an actor (its own task) and a coordinator task
owns the environment, so slow (LLM) policies run concurrently across episodes
and every turn can have a deadline. The synchronous functions run the very same
async code through ``actors.run`` (``anyio.run`` on asyncio, on uvloop when
installed; ``ACTORS_LOOP=asyncio`` picks the standard loop).

Policies: a callable ``(observation, role) -> ChaosOpsAction``, sync (called
inline; keep it fast) or async; wrap a blocking one in ``actors.in_thread``.
A role without a policy plays noop. A turn whose policy times out, raises, or
returns anything but a ``ChaosOpsAction`` plays noop and is marked
(``timed_out`` / ``error``); an environment error ends the episode with
status ``"failed"``.

Batches: :func:`arun_batch` / :func:`run_batch` return results in order;
:func:`open_batch` streams them as episodes finish and counts them live
(``started``, ``finished``, ``in_flight``, ``failed``, ``total``) for progress
displays. By default a batch keeps what it accumulates out of the garbage
collector's sight while it runs, so that its pauses stay short (``gc_freeze``).

Example::

    from chaosops.agents.policies import heuristic_policy
    from chaosops.agents.runner import run_batch
    from chaosops.curriculum.generator import scenarios_for_tier
    from chaosops.env.environment import DEFAULT_TURN_ORDER

    results = run_batch(
        scenarios_for_tier("hard"),
        lambda sc: dict.fromkeys(DEFAULT_TURN_ORDER, heuristic_policy(sc.seed)),
        concurrency=64,
        turn_timeout=5.0,
    )
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import anyio

import actors
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.results import EpisodeResult, EpisodeStep
from chaosops.env.world_sim import Scenario

from .adapters import (
    Policies,
    PolicyMap,
    TurnTimeoutArg,
    Unbuilt,
    describe_finish,
    describe_turn,
    final_state,
    is_action,
    noop,
    recorder,
    role_map,
    role_map_of,
    timeout_field,
    timeouts_of,
)
from .checks import check_batch, check_fields
from .metrics import count_episode

__all__ = [
    "BatchOptions",
    "EpisodeResult",
    "EpisodeStep",
    "Policies",
    "PolicyMap",
    "TurnTimeoutArg",
    "arun_batch",
    "arun_episode",
    "count_episode",
    "open_batch",
    "role_map_of",
    "run_batch",
    "run_episode",
]


@dataclass(frozen=True, slots=True)
class BatchOptions:
    """How a batch runs (the keyword arguments of :func:`run_batch`,
    :func:`arun_batch` and :func:`open_batch`): at most ``concurrency``
    episodes at once, each turn under ``turn_timeout``, each episode on a fresh
    ``env_factory()``, ``gc_freeze`` (see :func:`arun_batch`) and the
    ``fields`` its logs, spans and metrics carry (see :data:`FIELDS_DOC`)."""

    concurrency: int = 64
    turn_timeout: TurnTimeoutArg = None
    env_factory: Callable[[], ChaosOpsEnvironment] = ChaosOpsEnvironment
    gc_freeze: bool = False
    fields: Mapping[str, Any] | None = None


# ------------------------------------------------------------------- async


async def arun_episode(
    env: ChaosOpsEnvironment,
    scenario: Scenario,
    policy_by_role: PolicyMap,
    *,
    max_turns: int | None = None,
    turn_timeout: TurnTimeoutArg = None,
    fields: Mapping[str, Any] | None = None,
    episode_id: str | None = None,
) -> EpisodeResult:
    """Play ``scenario`` on ``env`` (reset here) with one actor per role.

    ``max_turns`` defaults to ``scenario.max_steps * len(env.turn_order)``.
    ``turn_timeout``: see :data:`TurnTimeoutArg`. ``fields``: see :data:`FIELDS_DOC`.
    ``episode_id``: the episode's id (None: a new one).
    """
    fields = check_fields(fields)
    if max_turns is None:
        max_turns = scenario.max_steps * len(env.turn_order)
    episode_id = episode_id or actors.new_episode_id()
    steps: list[EpisodeStep] = []
    trace = await actors.run_episode(
        cast(actors.TurnEnv, env),  # its reset takes the scenario by keyword, as TurnEnv's
        policies=role_map(policy_by_role),
        fallback=noop,
        is_action=is_action,
        reset_kwargs={"scenario": scenario, "episode_id": episode_id},
        max_turns=max_turns,
        turn_timeout=timeouts_of(turn_timeout, scenario),
        episode_id=episode_id,
        log_fields={
            **fields,
            "failure_type": scenario.failure_type,
            "difficulty": scenario.difficulty,
            "seed": scenario.seed,
        },
        describe_turn=describe_turn,
        describe_finish=describe_finish,
        after_step=recorder(steps),
        record_turns=False,  # the recorder's steps are the records
    )
    result = EpisodeResult.from_state(
        scenario,
        steps,
        final_state(env, trace),
        episode_id=episode_id,
        status=trace.status,
        error=trace.error,
        timeouts=trace.timeouts,
        errors=trace.errors,
        wall_s=trace.wall_s,
    )
    meter = actors.current_meter()
    if meter is not None and result.status == "ok":
        count_episode(meter, result, fields)
    return result


def _episode_job(
    policies: Policies,
    turn_timeout: TurnTimeoutArg,
    env_factory: Callable[[], ChaosOpsEnvironment],
    fields: Mapping[str, Any],
) -> Callable[[Scenario], Any]:
    # Returns arun_episode's coroutine (the batch worker awaits it) instead of
    # awaiting it in a coroutine of its own: one level less to walk through
    # each time the coordinator resumes.
    def job(scenario: Scenario) -> Coroutine[Any, Any, EpisodeResult]:
        try:
            env: Any = env_factory()
        except Exception as exc:  # this episode's environment only: it fails, the batch goes on
            env = Unbuilt(exc)
        return arun_episode(
            env,
            scenario,
            role_map_of(policies, scenario),
            turn_timeout=turn_timeout,
            fields=fields,
        )

    return job


def _failed(result: EpisodeResult) -> bool:
    return result.status != "ok"


def _jobs(
    scenarios: Iterable[Scenario], policies: Policies, options: BatchOptions
) -> dict[str, Any]:
    """The arguments of ``actors.run_jobs`` / ``open_jobs`` for a batch of episodes."""
    fields = check_fields(options.fields)
    turn_timeout = options.turn_timeout
    return {
        "items": check_batch(scenarios, policies, turn_timeout),
        "job": _episode_job(policies, turn_timeout, options.env_factory, fields),
        "concurrency": options.concurrency,
        "failed": _failed,
        "log_fields": {**fields, "turn_timeout": timeout_field(turn_timeout)},
        "gc_freeze": options.gc_freeze,
    }


async def arun_batch(
    scenarios: Iterable[Scenario],
    policies: Policies,
    *,
    concurrency: int = 64,
    turn_timeout: TurnTimeoutArg = None,
    env_factory: Callable[[], ChaosOpsEnvironment] = ChaosOpsEnvironment,
    gc_freeze: bool = False,
    fields: Mapping[str, Any] | None = None,
) -> list[EpisodeResult]:
    """Run one episode per scenario (each on a fresh environment), at most
    ``concurrency`` at a time; results in the order of ``scenarios``, each
    turn under ``turn_timeout``, each episode on a fresh ``env_factory()``.
    (:mod:`chaosops.runs.workers` has the same on Ray worker actors.)

    ``policies`` is a role map or a factory ``scenario -> role map``. With
    deterministic policies and no deadline, the results equal running the
    episodes one by one, whatever the concurrency — provided each episode gets
    its own policies: a shared map of *stateful* policies (the scripted random
    and heuristic ones keep a random generator) sees the turns of concurrent
    episodes interleaved, so its results depend on scheduling unless
    ``concurrency`` is 1. Use a factory seeded per scenario.

    An environment failure marks that episode ``"failed"``; the batch goes on.
    A failure is ``env_factory`` raising, ``reset`` or ``step`` raising, or
    either returning something that is no observation (no ``done``,
    ``reward`` or hashable ``turn_role``, a ``turn_role`` outside the
    environment's turn order, a ``done`` whose truth raises). Cancelling the
    caller cancels every episode. ``fields``: see :data:`FIELDS_DOC`.

    ``gc_freeze`` (off by default: it changes interpreter-wide state; a program
    that owns its process opts in, as the ``chaosops`` command does): what
    survives the garbage collector while the
    batch runs is frozen out of its sight, so that no collection walks the
    results and traces again (each walk stalls every episode in flight); the
    cost is that cyclic garbage alive at a freeze is only collected after the
    batch, which is why a batch that makes such garbage (requests cancelled at
    their deadline) freezes less. See ``actors.gc_frozen``.
    """
    options = BatchOptions(concurrency, turn_timeout, env_factory, gc_freeze, fields)
    return await actors.run_jobs(**_jobs(scenarios, policies, options))


@asynccontextmanager
async def open_batch(
    scenarios: Iterable[Scenario],
    policies: Policies,
    *,
    concurrency: int = 64,
    turn_timeout: TurnTimeoutArg = None,
    env_factory: Callable[[], ChaosOpsEnvironment] = ChaosOpsEnvironment,
    gc_freeze: bool = False,
    fields: Mapping[str, Any] | None = None,
) -> AsyncIterator[actors.JobResults[EpisodeResult]]:
    """:func:`arun_batch` as a stream: ``(index, result)`` as each episode finishes.

    ::

        async with open_batch(scenarios, factory, concurrency=64) as results:
            async for index, result in results:
                progress.update(done=results.finished, running=results.in_flight)

    ``index`` is the scenario's position. The stream (an ``actors.JobResults``)
    also counts episodes live: ``total``, ``started``, ``finished`` (including
    results not read yet), ``failed`` and ``in_flight`` (started and not
    finished: the exact number running now). Leaving the block early cancels
    the episodes still running. Same notes on shared stateful policies and on
    ``gc_freeze`` as :func:`arun_batch`.
    """
    options = BatchOptions(concurrency, turn_timeout, env_factory, gc_freeze, fields)
    async with actors.open_jobs(**_jobs(scenarios, policies, options)) as results:
        yield results


# -------------------------------------------------------------------- sync


def _in_trio() -> bool:
    """Whether trio (anyio's other backend) runs in this thread."""
    trio = sys.modules.get("trio")  # not imported: not running
    if trio is None:
        return False
    try:
        trio.lowlevel.current_root_task()
    except RuntimeError:  # outside trio.run
        return False
    return True


def _no_running_loop(name: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        if not _in_trio():
            return
    raise RuntimeError(
        f"{name}() cannot run inside a running event loop (it starts its own); "
        f"use 'await a{name}(...)' instead"
    )


def run_episode(
    env: ChaosOpsEnvironment,
    scenario: Scenario,
    policy_by_role: PolicyMap,
    *,
    max_turns: int | None = None,
    turn_timeout: TurnTimeoutArg = None,
    fields: Mapping[str, Any] | None = None,
) -> EpisodeResult:
    """Synchronous :func:`arun_episode` (same runtime, run with ``actors.run``).

    Raises RuntimeError when called from a running event loop: await
    :func:`arun_episode` there.
    """
    _no_running_loop("run_episode")
    opened = _Opened()
    play = functools.partial(
        arun_episode, env, scenario, opened.track(policy_by_role),
        max_turns=max_turns, turn_timeout=turn_timeout, fields=fields,
    )  # fmt: skip
    return actors.run(functools.partial(opened.closing, play))


def run_batch(
    scenarios: Iterable[Scenario],
    policies: Policies,
    *,
    concurrency: int = 64,
    turn_timeout: TurnTimeoutArg = None,
    env_factory: Callable[[], ChaosOpsEnvironment] = ChaosOpsEnvironment,
    gc_freeze: bool = False,
    fields: Mapping[str, Any] | None = None,
) -> list[EpisodeResult]:
    """Synchronous :func:`arun_batch`: results in the order of ``scenarios``.

    ``policies``: a role map, or (recommended) a factory ``scenario -> role
    map``; a shared map of stateful policies sees the turns of concurrent
    episodes interleaved unless ``concurrency`` is 1. ``gc_freeze``: see
    :func:`arun_batch`. Raises RuntimeError when
    called from a running event loop: await :func:`arun_batch` there.
    """
    _no_running_loop("run_batch")
    opened = _Opened()
    play = functools.partial(
        arun_batch, scenarios, opened.track(policies), concurrency=concurrency,
        turn_timeout=turn_timeout, env_factory=env_factory, gc_freeze=gc_freeze, fields=fields,
    )  # fmt: skip
    return actors.run(functools.partial(opened.closing, play))


class _Opened:
    """The policies a synchronous run handed to its episodes, closed (``aclose``)
    before its event loop ends: what an LLM policy opened (its HTTP session)
    belongs to that loop, and a later run opens its own."""

    def __init__(self) -> None:
        self._seen: dict[int, Any] = {}

    def track(self, policies: Any) -> Any:
        """``policies`` (a role map or a factory of them), noting each policy handed out."""
        if isinstance(policies, Mapping):
            self._note(policies.values())
            return policies
        if not callable(policies):  # the batch's own checks name what is wrong
            return policies

        @functools.wraps(policies)  # its signature, which the batch's checks read
        def factory(scenario: Scenario) -> Mapping[Any, Any]:
            chosen = policies(scenario)
            if isinstance(chosen, Mapping):
                self._note(chosen.values())
            return chosen

        return factory

    def _note(self, policies: Iterable[Any]) -> None:
        for policy in policies:
            if callable(getattr(policy, "aclose", None)):
                self._seen.setdefault(id(policy), policy)

    async def closing(self, play: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        try:
            return await play()
        finally:
            with anyio.CancelScope(shield=True):
                for policy in self._seen.values():
                    await policy.aclose()
