"""ChaosOpsToolEnv as TRL reads and drives it: its tools' schemas, episodes
equal to the runner's, illegal moves, rewards, closing; and the dataset rows."""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

import jsonschema
import pytest

from chaosops.agents.policies import heuristic_policy, oracle_policy
from chaosops.agents.runner import run_episode
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction, FailureType
from chaosops.env.rules import IllegalMove
from chaosops.env.world_sim import Scenario
from chaosops.train import rows, training_scenarios
from chaosops.train.trl import ChaosOpsToolEnv
from tests._needs import needs

try:
    from transformers.utils import get_json_schema
except ImportError:  # pragma: no cover - the test extra installs it
    get_json_schema = None


def _tools(env: ChaosOpsToolEnv) -> dict[str, Any]:
    """The methods TRL offers as tools (as GRPOTrainer lists them)."""
    return {
        name: getattr(env, name)
        for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    }


def test_each_action_kind_is_one_tool_with_a_valid_schema() -> None:
    needs(get_json_schema, "transformers", "pip install -e '.[test]'")
    env = ChaosOpsToolEnv()
    tools = _tools(env)
    assert sorted(tools) == sorted(kind.value for kind in ActionType)
    for name, method in tools.items():
        schema = get_json_schema(method)
        assert schema["function"]["name"] == name and schema["function"]["description"]
        parameters = schema["function"]["parameters"]
        jsonschema.Draft202012Validator.check_schema(parameters)
        for prop in parameters["properties"].values():
            assert prop["description"], f"{name}: an argument without a description"
    scale = get_json_schema(tools["scale"])["function"]["parameters"]
    assert scale["properties"]["replicas"]["type"] == "integer"
    assert scale["required"] == ["service", "replicas"]


def _call(env: ChaosOpsToolEnv, action: ChaosOpsAction) -> str:
    """Call the tool of ``action``, as a model's tool call would."""
    kind, args = ActionType(action.action_type), dict(action.args)
    if kind in (ActionType.RESTART, ActionType.ROLLBACK):
        return getattr(env, kind.value)(service=action.target)
    if kind is ActionType.SCALE:
        return env.scale(service=action.target, replicas=args["replicas"])
    if kind is ActionType.FLAG_ROGUE:
        return env.flag_rogue(agent_name=action.target or args["agent_name"])
    return getattr(env, kind.value)(**args)


@pytest.mark.parametrize("failure", list(FailureType))
@pytest.mark.parametrize("role", ["sre", "oversight", "dev", "manager"])
def test_an_episode_through_the_tools_equals_the_runners(failure: FailureType, role: str) -> None:
    scenario = Scenario.from_type(failure, seed=3, difficulty="hard")
    trained = AgentRole(role)
    oracle = oracle_policy(failure)
    moves: list[ChaosOpsAction] = []
    with ChaosOpsToolEnv() as env:
        text = env.reset(
            failure_type=failure.value,
            difficulty="hard",
            seed=3,
            role=role,
            max_steps=scenario.max_steps,
            prompt=[{"role": "user", "content": ""}],
        )
        assert f"Your role: {role}" in text
        while not env.done:
            obs = env._world.play.observation
            move = oracle(obs, trained)
            moves.append(move)
            text = _call(env, move)
        tool_reward, record = env.get_reward(), env.result

    replayed = iter(moves)
    others = heuristic_policy(seed=scenario.seed)
    policies = {r: others for r in AgentRole} | {trained: lambda obs, r: next(replayed)}
    result = run_episode(ChaosOpsEnvironment(), scenario, policies)
    assert record is not None and record.cumulative_reward == result.cumulative_reward
    repaid = 0.0  # a right declaration and a right flag are each paid once
    for part in ("early_root_cause_bonus", "rogue_caught_bonus"):
        paid = [getattr(s.breakdown, part) for s in result.steps if s.breakdown]
        repaid += sum(paid) - next((bonus for bonus in paid if bonus), 0.0)
    assert tool_reward == pytest.approx(result.cumulative_reward - repaid)
    assert [s.action for s in result.steps if s.role is trained] == [
        m.model_copy(update={"role": trained}) for m in moves
    ]
    assert "The episode is over." in text
    assert result.resolved == ("incident resolved" in text)


def test_illegal_moves_and_moves_after_the_end_raise_what_a_model_can_read() -> None:
    env = ChaosOpsToolEnv(others="oracle")
    with pytest.raises(IllegalMove, match="reset"):
        env.noop()
    env.reset(failure_type="db_deadlock", seed=0, role="sre")
    with pytest.raises(IllegalMove, match="flag_rogue is the oversight's action"):
        env.flag_rogue("deploy_bot")
    with pytest.raises(IllegalMove, match="no service of the view"):
        env.restart("mainframe")
    with pytest.raises(IllegalMove, match="no failure type"):
        env.identify_root_cause("gremlins")
    assert env._world.play.env.state.step_count == 0  # nothing illegal was applied
    env.restart("db")  # the fix: resolved at once
    assert env.done and env.get_reward() > 0
    with pytest.raises(IllegalMove, match="the episode is over"):
        env.noop()


def _noop(obs: Any, role: AgentRole) -> ChaosOpsAction:
    return ChaosOpsAction(role=role, action_type="noop")


def test_the_answers_hold_no_reward_line_and_a_cut_episode_pays_its_penalty() -> None:
    for others in ("heuristic", "random", "noop"):
        policy = others if others != "noop" else _noop
        env = ChaosOpsToolEnv(others=policy)
        texts = [env.reset(failure_type="memory_leak", seed=5, role="dev", max_steps=6)]
        while not env.done:
            texts.append(env.noop())
        assert not any("Reward since" in text for text in texts)  # a line run's prompts lack
        assert env.get_reward() == env.result.cumulative_reward  # no declaration repeated
        if others == "noop":  # nobody fixes it: cut at max_steps, the penalty counted
            assert env._world.play.env.state.step_count == 6 and env.get_reward() < 0


def test_close_ends_the_episode_and_the_context_manager_closes() -> None:
    with ChaosOpsToolEnv() as env:
        env.reset(seed=1)
    with pytest.raises(IllegalMove, match="reset"):
        env.noop()
    env.reset(seed=1)
    env.close()
    assert env.done
    assert "close" not in _tools(env)


def test_rows_are_one_per_scenario_with_the_columns_reset_reads(canonical_size: int) -> None:
    table = rows(role="oversight", others=None)
    assert len(table) == canonical_size and {r["failure_type"] for r in table} == {
        f.value for f in FailureType
    }
    first = table[0]
    assert first["role"] == "oversight" and first["prompt"][0]["role"] == "system"
    assert "calling one tool" in first["prompt"][0]["content"]
    assert "Answer format" not in first["prompt"][0]["content"]
    env = ChaosOpsToolEnv()
    assert "Your role: oversight" in env.reset(**first)


def test_async_policies_play_the_other_roles_on_the_environments_own_loop() -> None:
    scripted = heuristic_policy(seed=4)

    async def others(obs: Any, role: AgentRole) -> ChaosOpsAction:
        await asyncio.sleep(0)
        return scripted(obs, role)

    with ChaosOpsToolEnv(others=others) as env, ChaosOpsToolEnv() as same:
        row = {"failure_type": "dns_outage", "seed": 4, "role": "manager"}
        assert env.reset(**row) == same.reset(**row)
        while not same.done:
            assert env.noop() == same.noop()
        assert env.get_reward() == same.get_reward()


@pytest.mark.parametrize("role", ["sre", "oversight", "dev", "manager"])
def test_rows_leave_out_the_scenarios_the_others_close_before_the_role_moves(
    role: str, canonical_size: int
) -> None:
    every = rows(role=role, others=None)
    kept = rows(role=role)  # the others as ChaosOpsToolEnv plays them by default
    env = ChaosOpsToolEnv()
    over = [row for row in every if "The episode is over." in env.reset(**row)]
    assert [row for row in every if row not in over] == kept
    assert len(kept) + len(over) == canonical_size and kept  # every role has scenarios to learn on
    assert (role == "sre") == (not over)  # the sre moves first: it always plays
    for row in kept:
        assert "The episode is over." not in env.reset(**row)
        assert env.noop()  # a move of the role's own, not refused as after the end


def test_rows_follow_the_others_they_are_told_of() -> None:
    with ChaosOpsToolEnv(others="random") as env:
        kept = rows(role="dev", others="random")
        assert all("The episode is over." not in env.reset(**row) for row in kept)
    assert kept != rows(role="dev")  # the heuristic closes other scenarios than random does


def test_reset_and_the_base_url_are_checked_with_one_line_each() -> None:
    env = ChaosOpsToolEnv()
    with pytest.raises(ValueError, match="seed: Input should be a valid integer"):
        env.reset(failure_type="cascade", seed="abc")
    with pytest.raises(ValueError, match="difficulty: unknown difficulty 'hardd'"):
        env.reset(failure_type="cascade", difficulty="hardd")
    with pytest.raises(ValueError, match="base_url='localhost:8000': a chaosops serve URL"):
        ChaosOpsToolEnv(base_url="localhost:8000")


@pytest.mark.parametrize("role", ["sre", "dev"])
def test_training_rows_share_no_first_prompt_with_the_held_out_rows(role: str) -> None:
    def opening(row: dict) -> str:
        with ChaosOpsToolEnv() as env:
            return json.dumps(row["prompt"]) + env.reset(**row)

    held = {opening(row) for row in rows(role=role)}
    train = rows(role=role, seed_offset=1000)
    assert train and not any(opening(row) in held for row in train)
    assert {row["difficulty"] for row in train} == {"hard"}  # the only openings a seed changes


@pytest.mark.parametrize("role", [role.value for role in AgentRole])
def test_the_training_scenarios_open_as_no_held_out_row_and_cover_every_fix(role: str) -> None:
    def opening(row: dict) -> str:
        with ChaosOpsToolEnv() as env:
            return json.dumps(row["prompt"]) + env.reset(**row)

    held = {opening(row) for row in rows(role=role, others=None)}
    train = rows(role=role, scenarios=training_scenarios())
    assert len(train) >= 15 and not any(opening(row) in held for row in train)
    scenarios = training_scenarios()
    assert {sc.failure_type for sc in scenarios} == set(FailureType)
    assert {sc.difficulty.value for sc in scenarios} == {"easy", "medium", "hard"}
    if role == "sre":  # the first to move: no scenario is closed before its turn
        assert {row["failure_type"] for row in train} == {f.value for f in FailureType}
    with pytest.raises(ValueError, match="scenarios= is instead of suites= and seed_offset="):
        rows(seed_offset=1000, scenarios=training_scenarios())
