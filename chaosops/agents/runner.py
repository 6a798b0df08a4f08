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
import inspect
import sys
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeAlias, cast

import anyio

import actors
from chaosops.env.environment import DEFAULT_TURN_ORDER, ChaosOpsEnvironment
from chaosops.env.models import (
    ActionType,
    AgentRole,
    ChaosOpsAction,
)
from chaosops.env.results import EpisodeResult, EpisodeStep
from chaosops.env.world_sim import Scenario

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

PolicyMap: TypeAlias = Mapping[AgentRole | str, actors.Policy]
"""Role -> policy; roles not in it play noop."""

Policies: TypeAlias = PolicyMap | Callable[[Scenario], PolicyMap]
"""A role map shared by every episode, or a factory building one per scenario."""

TurnTimeoutArg: TypeAlias = (
    float | Mapping[AgentRole | str, float | None] | Callable[[Scenario], Any] | None
)
"""Seconds for every turn, per role (roles not named have no deadline), a
function of the scenario returning either, or None (no deadline)."""


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


# --------------------------------------------------------------- adapters


def _noop(role: Any) -> ChaosOpsAction:
    # The fallback of every timed-out or failed turn.
    return ChaosOpsAction(role=role, action_type=ActionType.NOOP)


def _is_action(value: object) -> bool:
    # The type, and the fields the environment reads: a model built without
    # validation (model_construct) may hold anything, and would fail the
    # environment (ending the episode) instead of costing its turn.
    # Runs on every reply: the three fields a bad value breaks the step with,
    # read straight from __dict__ (the role is overwritten by the step; the
    # target is rendered and looked up, so a str or None; the args' values
    # are converted by the world as it reads them).
    if not isinstance(value, ChaosOpsAction):
        return False
    fields = value.__dict__
    try:
        target = fields["target"]
        return (
            type(fields["action_type"]) is ActionType
            and type(fields["args"]) is dict
            and (target is None or isinstance(target, str))
        )
    except KeyError:  # model_construct() without them
        return False


def _describe_turn(record: actors.TurnRecord) -> dict[str, Any]:
    # The models' field values straight from their __dict__: an attribute of
    # a pydantic model is a slow lookup (models define __getattr__), and this
    # runs for every logged turn.
    action = record.action.__dict__
    try:
        step = record.next_observation.__dict__["step"]
    except (AttributeError, KeyError):  # an env_factory's own observation type
        step = getattr(record.next_observation, "step", None)
    return {
        "step": step,
        "action_type": action["action_type"],
        "target": action["target"],
        "args": action["args"],
    }


def _describe_finish(env: Any, trace: actors.EpisodeTrace) -> dict[str, Any]:
    state = _final_state(env, trace)
    if state is None:
        return {"resolved": False, "final_step": 0, "cumulative_reward": 0.0}
    return {
        "resolved": state.resolved,
        "final_step": state.step_count,
        "cumulative_reward": state.cumulative_reward,
    }


def _final_state(env: Any, trace: actors.EpisodeTrace) -> Any:
    """The environment's state at the episode's end; None where the episode
    never started (reset failed: a reused environment still holds the
    previous episode's state, which neither the result nor the log may report)."""
    if trace.final_observation is None:
        return None
    try:
        return env.state
    except Exception:  # an environment with no state to read
        return None


class _Unbuilt:
    """An environment that ``env_factory`` failed to build: its ``reset``
    raises that failure, so that the episode fails like any other whose
    environment broke (status ``failed``, logged) and the batch goes on."""

    turn_order = DEFAULT_TURN_ORDER

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def reset(self, **_: Any) -> Any:
        raise self.exc

    def step(self, action: Any) -> Any:  # pragma: no cover - reset always raised
        raise self.exc


_ROLES_ACCEPTED = ", ".join(r.value for r in AgentRole)


def _role(role: Any, where: str) -> AgentRole:
    try:
        return AgentRole(role)
    except ValueError:
        raise ValueError(f"unknown role {role!r} in {where}; roles are {_ROLES_ACCEPTED}") from None


def _role_map(policies: PolicyMap) -> dict[AgentRole, actors.Policy]:
    if not isinstance(policies, Mapping):
        raise TypeError(
            f"the policies must be a mapping role -> policy, got {policies!r:.80}; "
            "to play one policy for every role: dict.fromkeys(AgentRole, policy)"
        )
    if all(type(role) is AgentRole for role in policies):
        table = dict(policies)
    else:
        table = {_role(role, "the policy map"): policy for role, policy in policies.items()}
    for role, policy in table.items():
        if not callable(policy):
            raise TypeError(
                f"the policy for role {role.value!r} is {policy!r:.80}, not a callable "
                "policy(observation, role) (see chaosops.agents.policies)"
            )
    return table  # type: ignore[return-value]


def _timeouts(turn_timeout: TurnTimeoutArg, scenario: Scenario) -> actors.TurnTimeout:
    given: Any = turn_timeout(scenario) if callable(turn_timeout) else turn_timeout
    if isinstance(given, Mapping):
        return {_role(role, "turn_timeout"): seconds for role, seconds in given.items()}
    return given


def _check_batch(
    scenarios: Iterable[Scenario], policies: Policies, turn_timeout: TurnTimeoutArg
) -> Sequence[Scenario]:
    """The scenarios as a sequence, once the batch's arguments are checked.

    Checked before any episode starts, so that a wrong argument raises itself
    (a ValueError or TypeError saying what is accepted) instead of failing
    every episode inside the batch's task group (an ExceptionGroup).
    What depends on the scenario (a factory's role map, a per-scenario
    timeout) is checked as each episode starts.
    """
    if isinstance(scenarios, str | bytes | Scenario) or not isinstance(scenarios, Iterable):
        raise TypeError(
            f"scenarios must be an iterable of Scenario objects, got {scenarios!r:.80} "
            "(see chaosops.curriculum.generator.scenarios_for_tier and chaosops.scenarios)"
        )
    # a Sequence is kept as it is (a lazy one makes each scenario when asked)
    listed = scenarios if isinstance(scenarios, Sequence) else list(scenarios)
    for index, scenario in enumerate(listed):
        if not isinstance(scenario, Scenario):
            raise TypeError(f"scenarios[{index}] is {scenario!r:.80}, not a Scenario")
    if callable(policies) and not isinstance(policies, Mapping):
        try:
            inspect.signature(policies).bind(None)
        except TypeError:
            raise TypeError(
                f"policies {policies!r:.80} is a callable that cannot take one scenario: a "
                "factory takes a scenario and returns a role map; to play one policy for "
                "every role pass dict.fromkeys(AgentRole, policy)"
            ) from None
        except ValueError:  # no signature to read (some builtins): find out when called
            pass
    else:
        _role_map(policies)
    if not callable(turn_timeout):
        actors.timeouts_by_role(_timeouts(turn_timeout, None), AgentRole)  # type: ignore[arg-type]
    return listed


def role_map_of(policies: Policies, scenario: Scenario) -> PolicyMap:
    """The role map of one scenario: ``policies`` itself, or what the factory makes."""
    if not callable(policies) or isinstance(policies, Mapping):
        return policies
    table = policies(scenario)
    if not isinstance(table, Mapping):
        raise TypeError(
            f"the policies factory {policies!r:.80} returned {table!r:.80} for "
            f"scenario {scenario.failure_type.value} (seed {scenario.seed}), not a mapping "
            "role -> policy"
        )
    return table


def _timeout_field(turn_timeout: TurnTimeoutArg) -> Any:
    if callable(turn_timeout):
        return "per_scenario"
    if isinstance(turn_timeout, Mapping):
        return {str(getattr(k, "value", k)): v for k, v in turn_timeout.items()}
    return turn_timeout


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
    fields = _check_fields(fields)
    if max_turns is None:
        max_turns = scenario.max_steps * len(env.turn_order)
    episode_id = episode_id or actors.new_episode_id()
    steps: list[EpisodeStep] = []
    trace = await actors.run_episode(
        cast(actors.TurnEnv, env),  # its reset takes the scenario by keyword, as TurnEnv's
        policies=_role_map(policy_by_role),
        fallback=_noop,
        is_action=_is_action,
        reset_kwargs={"scenario": scenario, "episode_id": episode_id},
        max_turns=max_turns,
        turn_timeout=_timeouts(turn_timeout, scenario),
        episode_id=episode_id,
        log_fields={
            **fields,
            "failure_type": scenario.failure_type,
            "difficulty": scenario.difficulty,
            "seed": scenario.seed,
        },
        describe_turn=_describe_turn,
        describe_finish=_describe_finish,
        after_step=_recorder(steps),
        record_turns=False,  # the recorder's steps are the records
    )
    result = EpisodeResult.from_state(
        scenario,
        steps,
        _final_state(env, trace),
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


def _recorder(steps: list[EpisodeStep]) -> Callable[[Any, actors.TurnRecord], None]:
    """The ``after_step`` hook appending each step to ``steps`` as it is applied."""
    add_step = steps.append

    def after_step(env: Any, r: actors.TurnRecord) -> None:
        # One pass, positional fields: turn, role, observation, action, reward,
        # breakdown, done, timed_out, error, latency_s, info.
        next_observation = r.next_observation
        action = r.action
        if action.role is not r.role:
            # Another role's action: the environment took it as this role's
            # (docs/world.md: the role field is overwritten); the step records what it applied.
            action = action.model_copy(update={"role": r.role})
        add_step(
            EpisodeStep(
                r.turn, r.role, r.observation, action, next_observation.reward or 0.0,
                env.last_breakdown, next_observation.done, r.timed_out, r.error,
                r.latency_s, r.info,
            )
        )  # fmt: skip

    return after_step


def count_episode(meter: actors.Meter, result: EpisodeResult, fields: Mapping[str, Any]) -> None:
    """chaosops's own metrics, beside the runtime's (with its labels first,
    e.g. ``policy``): episodes scored by scenario and whether they were
    resolved, and the mean cumulative reward (a gauge: rewards are negative as
    often as not, which a counter or a summary's sum cannot follow)."""
    scenario = result.scenario
    labels = (*meter.values(fields), scenario.failure_type.value, scenario.difficulty.value)
    names = (*meter.labels, "failure_type", "difficulty")
    meter.counter(
        "episodes_scored",
        "Episodes played to their end, by failure type, difficulty and resolved (true, false).",
        (*names, "resolved"),
    ).labels(*labels, "true" if result.resolved else "false").inc()
    total = _REWARDS.setdefault(meter, {}).setdefault(labels, [0.0, 0])
    total[0] += result.cumulative_reward
    total[1] += 1
    meter.gauge(
        "episode_reward_mean",
        "Mean cumulative reward of the episodes played to their end.",
        names,
    ).labels(*labels).set(total[0] / total[1])


_REWARDS: weakref.WeakKeyDictionary[actors.Meter, dict[tuple[str, ...], list[Any]]] = (
    weakref.WeakKeyDictionary()
)
"""Per meter and label values: [sum of cumulative rewards, episodes]."""

_RESERVED_FIELDS = frozenset(
    {"episode_id", "failure_type", "difficulty", "seed", "episodes", "concurrency",
     "turn_timeout", "event", "level", "run_id", "timestamp"}
)  # fmt: skip

FIELDS_DOC = """``fields``: a mapping of a few str keys to scalar values naming the
batch (e.g. ``{"policy": "oracle"}``): added to ``run_started`` and to each
episode's ``episode_started`` event and ``episode`` span, and the values of
the metric labels configured with ``actors.configure_metrics(labels=...)``."""


def _check_fields(fields: Mapping[str, Any] | None) -> dict[str, Any]:
    if fields is None:
        return {}
    if not isinstance(fields, Mapping):
        raise TypeError(f"fields must be a mapping of names to values, got {fields!r:.80}")
    for key, value in fields.items():
        if not isinstance(key, str) or key in _RESERVED_FIELDS:
            raise ValueError(
                f"fields: {key!r:.80} is not a field name a batch may set (a str other than "
                f"{', '.join(sorted(_RESERVED_FIELDS))})"
            )
        if value is not None and not isinstance(value, str | bool | int | float):
            raise TypeError(
                f"fields: {key!r} must be a str, number, bool or None, got {value!r:.80}"
            )
    return dict(fields)


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
            env = _Unbuilt(exc)
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
    fields = _check_fields(options.fields)
    turn_timeout = options.turn_timeout
    return {
        "items": _check_batch(scenarios, policies, turn_timeout),
        "job": _episode_job(policies, turn_timeout, options.env_factory, fields),
        "concurrency": options.concurrency,
        "failed": _failed,
        "log_fields": {**fields, "turn_timeout": _timeout_field(turn_timeout)},
        "gc_freeze": options.gc_freeze,
    }


async def arun_batch(
    scenarios: Iterable[Scenario], policies: Policies, **options: Any
) -> list[EpisodeResult]:
    """Run one episode per scenario (each on a fresh environment), at most
    ``concurrency`` at a time; results in the order of ``scenarios``.
    ``options`` are the fields of :class:`BatchOptions`.
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
    return await actors.run_jobs(**_jobs(scenarios, policies, BatchOptions(**options)))


@asynccontextmanager
async def open_batch(
    scenarios: Iterable[Scenario], policies: Policies, **options: Any
) -> AsyncIterator[actors.JobResults[EpisodeResult]]:
    """:func:`arun_batch` as a stream: ``(index, result)`` as each episode finishes
    (``options``: the fields of :class:`BatchOptions`).

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
    async with actors.open_jobs(**_jobs(scenarios, policies, BatchOptions(**options))) as results:
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
    scenarios: Iterable[Scenario], policies: Policies, **options: Any
) -> list[EpisodeResult]:
    """Synchronous :func:`arun_batch`: results in the order of ``scenarios``
    (``options``: the fields of :class:`BatchOptions`).

    ``policies``: a role map, or (recommended) a factory ``scenario -> role
    map``; a shared map of stateful policies sees the turns of concurrent
    episodes interleaved unless ``concurrency`` is 1. ``gc_freeze``: see
    :func:`arun_batch`. Raises RuntimeError when
    called from a running event loop: await :func:`arun_batch` there.
    """
    _no_running_loop("run_batch")
    BatchOptions(**options)  # a wrong keyword fails here, not in the event loop
    opened = _Opened()
    play = functools.partial(arun_batch, scenarios, opened.track(policies), **options)
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
