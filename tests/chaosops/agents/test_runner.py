"""chaosops.agents.runner: the public API over the actors runtime."""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog

from actors import configure_logging, current_turn, disable_logging
from chaosops.agents.policies import heuristic_policy, oracle_policy, random_policy
from chaosops.agents.runner import (
    EpisodeResult,
    arun_batch,
    arun_episode,
    open_batch,
    run_batch,
    run_episode,
)
from chaosops.curriculum.generator import scenarios_for_tier
from chaosops.env.environment import DEFAULT_TURN_ORDER, ChaosOpsEnvironment
from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction, FailureType
from chaosops.env.world_sim import Scenario

from ..._needs import needs

FACTORIES: dict[str, Callable[[Scenario], Any]] = {
    "random": lambda sc: random_policy(sc.seed),
    "heuristic": lambda sc: heuristic_policy(sc.seed),
    "oracle": lambda sc: oracle_policy(sc.failure_type),
}
SUITE = [sc for tier in ("easy", "medium", "hard") for sc in scenarios_for_tier(tier)]


def role_map(policy: Any) -> dict[AgentRole, Any]:
    return dict.fromkeys(DEFAULT_TURN_ORDER, policy)


def digest(result: EpisodeResult) -> tuple[Any, ...]:
    return (
        result.status,
        result.resolved,
        result.final_step,
        result.cumulative_reward,
        result.wrong_fixes,
        tuple(result.oversight_flags),
        result.declared_root_cause,
        tuple(
            (s.turn, s.role, s.action.model_dump_json(), s.reward, s.done, s.timed_out, s.error)
            for s in result.steps
        ),
    )


def bare_loop(scenario: Scenario, policy: Any) -> tuple[Any, ...]:
    """The seed runner: a plain synchronous loop over the same environment."""
    env = ChaosOpsEnvironment()
    obs = env.reset(scenario=scenario)
    steps = []
    turn = 0
    while not obs.done and turn < scenario.max_steps * len(env.turn_order):
        role = obs.turn_role
        action = policy(obs, role)
        obs = env.step(action)
        steps.append((turn, role, action.model_dump_json(), obs.reward, obs.done, False, None))
        turn += 1
    s = env.state
    return (
        "ok", s.resolved, s.step_count, s.cumulative_reward, s.wrong_fixes,
        tuple(s.oversight_flags), s.declared_root_cause, tuple(steps),
    )  # fmt: skip


@pytest.mark.asyncio
@pytest.mark.parametrize("name", sorted(FACTORIES))
async def test_batch_equals_sequential_and_the_bare_loop(name: str) -> None:
    factory = FACTORIES[name]
    batch = await arun_batch(SUITE, lambda sc: role_map(factory(sc)), concurrency=64)
    sequential = [
        await arun_episode(ChaosOpsEnvironment(), sc, role_map(factory(sc))) for sc in SUITE
    ]
    assert [r.scenario for r in batch] == SUITE
    assert [digest(r) for r in batch] == [digest(r) for r in sequential]
    assert [digest(r) for r in batch] == [bare_loop(sc, factory(sc)) for sc in SUITE]
    if name == "oracle":
        assert all(r.resolved for r in batch)


def test_sync_api_and_result_fields() -> None:
    scenario = Scenario.from_type(FailureType.DB_DEADLOCK, seed=3)
    env = ChaosOpsEnvironment()
    result = run_episode(env, scenario, role_map(oracle_policy(scenario.failure_type)))
    assert result.status == "ok" and result.error is None and result.resolved
    assert result.mttr_steps == result.final_step == env.state.step_count == len(result.steps)
    assert result.episode_id == env.state.episode_id
    assert result.declared_root_cause is FailureType.DB_DEADLOCK
    assert result.cumulative_reward == env.state.cumulative_reward
    assert result.timeouts == result.errors == 0 and result.wall_s > 0
    for step in result.steps:
        assert step.breakdown is not None and step.reward == step.breakdown.total
        assert step.observation.turn_role is step.role and step.info == {}
    assert result.steps[-1].done

    unresolved = run_episode(ChaosOpsEnvironment(), scenario, {})
    assert not unresolved.resolved and unresolved.mttr_steps == -1
    assert len(unresolved.steps) == scenario.max_steps
    assert all(s.action.action_type is ActionType.NOOP for s in unresolved.steps)

    results = run_batch([scenario] * 3, lambda sc: role_map(heuristic_policy(sc.seed)))
    assert len({digest(r) for r in results}) == 1


def test_max_turns() -> None:
    scenario = Scenario.from_type(FailureType.MEMORY_LEAK, seed=1)
    result = run_episode(ChaosOpsEnvironment(), scenario, {}, max_turns=5)
    assert len(result.steps) == 5 and result.status == "ok"


def test_an_action_built_without_validation_costs_its_turn_not_the_episode() -> None:
    scenario = Scenario.from_type(FailureType.DB_DEADLOCK, seed=0)
    broken = [
        ChaosOpsAction.model_construct(role=AgentRole.SRE, action_type="explode", target=None,
                                       args={}),
        ChaosOpsAction.model_construct(role=AgentRole.SRE, action_type=ActionType.RESTART,
                                       target="db", args=None),
        ChaosOpsAction.model_construct(role=AgentRole.SRE, action_type=ActionType.RESTART,
                                       target=5, args={}),
        ChaosOpsAction.model_construct(role=AgentRole.SRE, action_type=ActionType.RESTART,
                                       target=["db"], args={}),
        ChaosOpsAction.model_construct(),
    ]  # fmt: skip
    for action in broken:
        result = run_episode(ChaosOpsEnvironment(), scenario, {"sre": lambda o, r, a=action: a},
                             max_turns=4)  # fmt: skip
        assert result.status == "ok" and len(result.steps) == 4, result.error
        sre = result.steps[0]
        assert sre.error is not None and sre.error.startswith("TypeError: policy returned")
        assert sre.action.action_type == ActionType.NOOP and result.errors == 1


def test_another_role_s_action_is_recorded_as_applied() -> None:
    """docs/world.md, "The environment": step() takes the action as the current
    role's (its role field is overwritten); the step records that action, not
    the one returned."""
    scenario = Scenario.from_type(FailureType.DB_DEADLOCK, seed=0)
    escalate = ChaosOpsAction(role=AgentRole.DEV, action_type=ActionType.ESCALATE)
    result = run_episode(
        ChaosOpsEnvironment(),
        scenario,
        dict.fromkeys(DEFAULT_TURN_ORDER, lambda o, r: escalate),
        max_turns=4,
    )
    assert [s.action.role for s in result.steps] == [s.role for s in result.steps]
    assert all(s.action.action_type == ActionType.ESCALATE and s.error is None
               for s in result.steps)  # fmt: skip
    assert escalate.role == AgentRole.DEV  # the policy's object is left as it was


@pytest.mark.asyncio
async def test_sync_api_inside_a_running_loop_says_to_await_the_async_one() -> None:
    scenario = Scenario.from_type(FailureType.DB_DEADLOCK, seed=0)
    with pytest.raises(RuntimeError, match=r"await arun_episode\(\.\.\.\)"):
        run_episode(ChaosOpsEnvironment(), scenario, {})
    with pytest.raises(RuntimeError, match=r"await arun_batch\(\.\.\.\)"):
        run_batch([scenario], {})


def test_sync_api_inside_trio_says_to_await_the_async_one() -> None:
    needs(importlib.util.find_spec("trio"), "trio", "pip install -e '.[test]'")
    trio = importlib.import_module("trio")
    scenario = Scenario.from_type(FailureType.DB_DEADLOCK, seed=0)
    raised: list[str] = []

    async def main() -> None:
        for call in (lambda: run_episode(ChaosOpsEnvironment(), scenario, {}),
                     lambda: run_batch([scenario], {})):  # fmt: skip
            with pytest.raises(RuntimeError, match=r"use 'await arun_") as info:
                call()
            raised.append(str(info.value))

    trio.run(main)
    assert len(raised) == 2 and "arun_episode" in raised[0] and "arun_batch" in raised[1]
    assert len(run_batch([scenario], {})) == 1  # outside trio: runs


@pytest.mark.asyncio
async def test_timeouts_errors_and_annotations_in_steps() -> None:
    async def hung(obs: Any, role: AgentRole) -> ChaosOpsAction:
        await anyio.sleep_forever()
        raise AssertionError

    async def annotated(obs: Any, role: AgentRole) -> ChaosOpsAction:
        current_turn().annotate(completion='{"action_type": "noop"}', usage={"total_tokens": 9})
        return ChaosOpsAction(role=role, action_type=ActionType.ESCALATE)

    def broken(obs: Any, role: AgentRole) -> ChaosOpsAction:
        raise KeyError("nope")

    scenario = Scenario.from_type(FailureType.DISK_FULL, seed=0, max_steps=4)
    result = await arun_episode(
        ChaosOpsEnvironment(),
        scenario,
        {"sre": hung, "oversight": annotated, "dev": broken, "manager": lambda o, r: "garbage"},
        turn_timeout=lambda sc: {"sre": 0.05},
    )
    sre, oversight, dev, manager = result.steps
    assert sre.timed_out and sre.action.action_type is ActionType.NOOP and sre.latency_s < 0.5
    assert oversight.info["usage"] == {"total_tokens": 9}
    assert oversight.action.action_type is ActionType.ESCALATE
    assert dev.error == "KeyError: 'nope'" and manager.error.startswith("TypeError")
    assert (result.timeouts, result.errors) == (1, 2)
    assert result.status == "ok" and len(result.steps) == 4


class FlakyEnv(ChaosOpsEnvironment):
    def step(self, action: Any) -> Any:
        if self.scenario is not None and self.scenario.seed == 666 and self.state.step_count == 2:
            raise RuntimeError("simulator crashed")
        return super().step(action)


@pytest.mark.asyncio
async def test_failing_environment_in_a_batch_fails_that_episode_only() -> None:
    scenarios = [Scenario.from_type(FailureType.DB_DEADLOCK, seed=s) for s in (1, 666, 2)]
    results = await arun_batch(scenarios, {}, env_factory=FlakyEnv, gc_freeze=False)
    assert [r.status for r in results] == ["ok", "failed", "ok"]
    assert results[1].error == "RuntimeError: simulator crashed"
    assert len(results[1].steps) == 2 and results[1].final_step == 2


class NoObservationEnv(ChaosOpsEnvironment):
    def step(self, action: Any) -> Any:
        observation = super().step(action)
        if self.scenario is not None and self.scenario.seed == 667 and self.state.step_count == 2:
            return None  # a simulator that forgot to return its observation
        return observation


@pytest.mark.asyncio
async def test_an_environment_that_returns_no_observation_or_is_never_built_fails_alone(
    tmp_path: Path,
) -> None:
    # env_factory fails for seed 13 (say, the simulator's process did not
    # start): that episode fails, logged like the others; the batch goes on.
    scenarios = [Scenario.from_type(FailureType.DB_DEADLOCK, seed=s) for s in (1, 667, 13, 2)]
    built = iter(range(len(scenarios)))

    def factory() -> ChaosOpsEnvironment:
        if next(built) == 2:
            raise ConnectionError("simulator did not start")
        return NoObservationEnv()

    configure_logging(tmp_path / "run.jsonl")
    try:
        with structlog.testing.capture_logs() as events:
            results = await arun_batch(scenarios, {}, env_factory=factory, concurrency=1,
                                       gc_freeze=False)  # fmt: skip
    finally:
        disable_logging()
    assert [r.status for r in results] == ["ok", "failed", "failed", "ok"]
    assert results[1].error == (
        "AttributeError: 'NoneType' object has no attribute 'done' "
        "(in the observation env.step returned)"
    )
    assert len(results[1].steps) == 1 and results[1].final_step == 2
    assert results[2].error == "ConnectionError: simulator did not start"
    assert results[2].steps == [] and results[2].final_step == 0 and not results[2].resolved
    finished = [e for e in events if e["event"] == "episode_finished"]
    assert [(e["status"], e["error"]) for e in finished] == [(r.status, r.error) for r in results]
    assert events[-1]["event"] == "run_finished" and events[-1]["failed"] == 2


def test_an_observation_of_another_type_is_logged_without_its_step(tmp_path: Path) -> None:
    # An env_factory's environment whose observations have done, reward and
    # turn_role but no step: the episode plays the same logged or not, and
    # its turn lines carry a null step.
    from types import SimpleNamespace

    class Plain(ChaosOpsEnvironment):
        def step(self, action: Any) -> Any:
            obs = super().step(action)
            return SimpleNamespace(done=obs.done, reward=obs.reward, turn_role=obs.turn_role)

    scenarios = [Scenario.from_type(FailureType.DB_DEADLOCK, seed=s, max_steps=3) for s in (1, 2)]
    unlogged = run_batch(scenarios, {}, env_factory=Plain, gc_freeze=False)
    configure_logging(tmp_path / "run.jsonl")
    try:
        with structlog.testing.capture_logs() as events:
            logged = run_batch(scenarios, {}, env_factory=Plain, gc_freeze=False)
    finally:
        disable_logging()
    assert [r.status for r in logged] == [r.status for r in unlogged] == ["ok", "ok"]
    turns = [e for e in events if e["event"] == "turn"]
    assert len(turns) == sum(len(r.steps) for r in logged)
    assert {e["step"] for e in turns} == {None}


def test_a_failed_reset_on_a_reused_environment_reports_nothing_of_the_last_episode(
    tmp_path: Path,
) -> None:
    # The result and the log agree: the episode that never started resolved
    # nothing, whatever the environment still holds from the one before.
    class ResetOnce(ChaosOpsEnvironment):
        resets = 0

        def reset(self, **kwargs: Any) -> Any:
            self.resets += 1
            if self.resets == 2:
                raise RuntimeError("reset broke")
            return super().reset(**kwargs)

    env = ResetOnce()
    scenario = Scenario.from_type(FailureType.DB_DEADLOCK, seed=3)
    configure_logging(tmp_path / "run.jsonl")
    try:
        with structlog.testing.capture_logs() as events:
            first = run_episode(env, scenario, role_map(oracle_policy(scenario.failure_type)))
            second = run_episode(env, scenario, role_map(oracle_policy(scenario.failure_type)))
    finally:
        disable_logging()
    assert first.resolved and first.final_step > 0
    assert second.status == "failed" and second.error == "RuntimeError: reset broke"
    assert (second.resolved, second.final_step, second.cumulative_reward) == (False, 0, 0.0)
    last = [e for e in events if e["event"] == "episode_finished"][-1]
    assert (last["status"], last["resolved"], last["final_step"], last["cumulative_reward"]) == (
        "failed",
        False,
        0,
        0.0,
    )


@pytest.mark.asyncio
async def test_open_batch_streams_every_result() -> None:
    scenarios = scenarios_for_tier("easy", episodes_per_type=2)
    seen: dict[int, EpisodeResult] = {}
    async with open_batch(scenarios, lambda sc: role_map(oracle_policy(sc.failure_type)),
                          concurrency=3) as results:  # fmt: skip
        async for index, result in results:
            seen[index] = result
            assert 0 <= results.in_flight <= 3 and results.finished >= len(seen)
    assert (results.total, results.started, results.finished) == (len(scenarios),) * 3
    assert results.in_flight == 0 and results.failed == 0
    assert sorted(seen) == list(range(len(scenarios)))
    assert all(seen[i].scenario == sc and seen[i].resolved for i, sc in enumerate(scenarios))


def test_unknown_role_is_rejected() -> None:
    scenario = Scenario.from_type(FailureType.DB_DEADLOCK, seed=0)
    with pytest.raises(ValueError, match="unknown role"):
        run_episode(ChaosOpsEnvironment(), scenario, {"janitor": lambda o, r: None})


EASY = scenarios_for_tier("easy", episodes_per_type=1)
ROLES_LISTED = "roles are sre, dev, manager, oversight"


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: run_batch(EASY, FACTORIES["heuristic"], turn_timeout=-1), ValueError,
         r"^turn_timeout must be a number of seconds >= 0, got -1$"),
        (lambda: run_batch(EASY, FACTORIES["heuristic"], turn_timeout="5"), ValueError,
         r"^turn_timeout must be a number of seconds >= 0, a mapping role -> seconds"),
        (lambda: run_batch(EASY, FACTORIES["heuristic"], turn_timeout={"boss": 1}), ValueError,
         rf"^unknown role 'boss' in turn_timeout; {ROLES_LISTED}$"),
        (lambda: run_batch(EASY, {"boss": heuristic_policy(0)}), ValueError,
         rf"^unknown role 'boss' in the policy map; {ROLES_LISTED}$"),
        (lambda: run_batch(EASY, None), TypeError,  # type: ignore[arg-type]
         r"^the policies must be a mapping role -> policy, got None"),
        (lambda: run_batch(EASY, {"sre": "heuristic"}), TypeError,
         r"^the policy for role 'sre' is 'heuristic', not a callable policy"),
        (lambda: run_batch(EASY, heuristic_policy(0)), TypeError,
         r"is a callable that cannot take one scenario: .* dict\.fromkeys\(AgentRole, policy\)"),
        (lambda: run_batch("hard", FACTORIES["heuristic"]), TypeError,  # type: ignore[arg-type]
         r"^scenarios must be an iterable of Scenario objects, got 'hard'"),
        (lambda: run_batch([*EASY, "x"], FACTORIES["heuristic"]), TypeError,  # type: ignore[list-item]
         rf"^scenarios\[{len(EASY)}\] is 'x', not a Scenario$"),
    ],
)  # fmt: skip
def test_bad_batch_arguments_raise_one_plain_error(
    call: Callable[[], Any], error: type[Exception], message: str
) -> None:
    # Raised as themselves before any episode starts, not as an ExceptionGroup
    # of every episode's failure.
    with pytest.raises(error, match=message):
        call()


@pytest.mark.asyncio
async def test_open_batch_checks_its_arguments_before_it_starts() -> None:
    with pytest.raises(ValueError, match="unknown role 'boss' in turn_timeout"):
        async with open_batch(EASY, FACTORIES["heuristic"], turn_timeout={"boss": 1}):
            pytest.fail("the batch started")


def test_a_factory_that_returns_no_role_map_is_named() -> None:
    with pytest.raises(ExceptionGroup) as info:  # a per-scenario failure: inside the batch
        run_batch(EASY[:1], lambda sc: heuristic_policy(sc.seed))
    (exc,) = info.value.exceptions
    assert isinstance(exc, TypeError) and "returned <function" in str(exc)
    assert "not a mapping role -> policy" in str(exc)


def test_run_episode_wants_a_role_map() -> None:
    with pytest.raises(TypeError, match=r"dict\.fromkeys"):
        run_episode(ChaosOpsEnvironment(), EASY[0], heuristic_policy(0))  # type: ignore[arg-type]


def test_json_log_of_a_batch(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    configure_logging(path, run_id="r1")
    try:
        scenarios = scenarios_for_tier("medium", episodes_per_type=1)
        results = run_batch(scenarios, lambda sc: role_map(heuristic_policy(sc.seed)),
                            concurrency=2, turn_timeout=5.0)  # fmt: skip
    finally:
        disable_logging()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert all(r["run_id"] == "r1" for r in records)
    assert records[0]["event"] == "run_started"
    assert records[0]["episodes"] == 3 and records[0]["turn_timeout"] == 5.0
    turns = [r for r in records if r["event"] == "turn"]
    assert len(turns) == sum(len(r.steps) for r in results)
    by_episode = {r.episode_id: r for r in results}
    for line in turns:
        step = by_episode[line["episode_id"]].steps[line["turn"]]
        assert line["role"] == step.role.value and line["action_type"] == step.action.action_type
        assert line["target"] == step.action.target and line["args"] == step.action.args
        assert line["reward"] == step.reward and line["step"] == step.observation.step + 1
    started = [r for r in records if r["event"] == "episode_started"]
    assert {(r["failure_type"], r["difficulty"], r["seed"]) for r in started} == {
        (sc.failure_type.value, sc.difficulty.value, sc.seed) for sc in scenarios
    }
    finished = [r for r in records if r["event"] == "episode_finished"]
    for line in finished:
        result = by_episode[line["episode_id"]]
        assert (line["status"], line["resolved"], line["final_step"]) == (
            result.status, result.resolved, result.final_step,
        )  # fmt: skip
        assert line["cumulative_reward"] == result.cumulative_reward
    assert records[-1]["event"] == "run_finished" and records[-1]["failed"] == 0
