"""One judge, with the bounds the schema advertises (1 to 20 replicas, 1 to
200 characters a message), through every entry point: text answers, the tool
environment, the server and the PettingZoo mask."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from chaosops.agents.llm import LLMPolicy
from chaosops.agents.llm.moves import moves_for
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction, FailureType
from chaosops.env.rules import MAX_MESSAGE_CHARS, MAX_REPLICAS, view_problem
from chaosops.env.world_sim import Scenario
from chaosops.train import IllegalMove
from chaosops.train.trl import ChaosOpsToolEnv

from ..conftest import StartMock

OUT_OF_BOUNDS = [
    ("scale", {"service": "payments", "replicas": 10**9}, "1 to 20, got 1000000000"),
    ("scale", {"service": "payments", "replicas": 0}, "1 to 20, got 0"),
    ("scale", {"service": "payments", "replicas": -3}, "1 to 20, got -3"),
    ("communicate", {"message": ""}, "1 to 200 characters, got 0"),
    ("communicate", {"message": "x" * 201}, "1 to 200 characters, got 201"),
]


def _first_view():
    scenario = Scenario.from_type(FailureType.AUTOSCALER_COST_CUT, seed=0)
    return ChaosOpsEnvironment().reset(scenario=scenario)


def test_the_bounds_are_the_schemas() -> None:
    schema = moves_for(_first_view(), AgentRole.SRE).schema
    by_kind = {v["properties"]["action_type"]["enum"][0]: v for v in schema["anyOf"]}
    replicas = by_kind["scale"]["properties"]["args"]["properties"]["replicas"]
    message = by_kind["communicate"]["properties"]["args"]["properties"]["message"]
    assert (replicas["minimum"], replicas["maximum"]) == (1, MAX_REPLICAS) == (1, 20)
    assert (message["minLength"], message["maxLength"]) == (1, MAX_MESSAGE_CHARS) == (1, 200)
    obs = _first_view()
    for replicas_ok in (1, 20):
        act = ChaosOpsAction(role="sre", action_type="scale", target="payments",
                             args={"replicas": replicas_ok})  # fmt: skip
        assert view_problem(act, obs) is None
    edge = ChaosOpsAction(role="sre", action_type="communicate", args={"message": "x" * 200})
    assert view_problem(edge, obs) is None


@pytest.mark.parametrize(("tool", "args", "said"), OUT_OF_BOUNDS)
def test_the_tool_environment_refuses_a_move_out_of_bounds(tool, args, said) -> None:
    with ChaosOpsToolEnv(reward="credit") as env:
        env.reset(failure_type="autoscaler_cost_cut", seed=0)
        with pytest.raises(IllegalMove, match=said):
            getattr(env, tool)(**args)
        assert env._world.play.env.state.step_count == 0  # nothing applied
        assert env.get_reward() == 0.0  # the refused move earned the role nothing


@pytest.mark.asyncio
async def test_a_text_answer_out_of_bounds_is_a_parse_error(
    start_mock: StartMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = '{"action_type": "scale", "target": "payments", "args": {"replicas": 1000000000}}'
    monkeypatch.setattr("chaosops.mock_llm.server.GARBAGE", (answer,))
    mock = await start_mock(rate_garbage=1.0)
    with capture_logs() as logs:
        async with LLMPolicy("chaosops-mock", base_url=mock.base_url) as policy:
            action = await policy(_first_view(), "sre")
    assert action.action_type is ActionType.NOOP
    errors = [e["error"] for e in logs if e["event"] == "parse_error"]
    assert errors and "1 to 20, got 1000000000" in errors[0]


def test_the_pettingzoo_mask_is_the_judges_verdict() -> None:
    pettingzoo = pytest.importorskip("chaosops.train.pettingzoo")
    env = pettingzoo.aec_env(failure_type="autoscaler_cost_cut")
    env.reset(seed=0)
    view = _first_view()  # the same scenario's first view: the sre's
    assert env.agent_selection == "sre"
    mask = env.observe(env.agent_selection)["action_mask"]
    for i, move in enumerate(pettingzoo.MOVES):
        action = ChaosOpsAction(role=env.agent_selection, **move)
        assert bool(mask[i]) == (view_problem(action, view) is None), move
