"""docs/world.md, "The environment": the turn-based environment; determinism."""

from __future__ import annotations

import pytest

from chaosops.agents.policies import heuristic_policy, random_policy
from chaosops.env.environment import DEFAULT_TURN_ORDER, ChaosOpsEnvironment
from chaosops.env.models import (
    ActionType,
    AgentRole,
    ChaosOpsAction,
    ChaosOpsObservation,
    DifficultyTier,
    FailureType,
)
from chaosops.env.rewards import StepRewardBreakdown
from chaosops.env.world_sim import Scenario, WorldSim

from .helpers import act


def test_default_turn_order() -> None:
    assert DEFAULT_TURN_ORDER == (
        AgentRole.SRE,
        AgentRole.OVERSIGHT,
        AgentRole.DEV,
        AgentRole.MANAGER,
    )
    env = ChaosOpsEnvironment()
    assert env.turn_order == DEFAULT_TURN_ORDER
    assert isinstance(env.world, WorldSim)


def test_reset_observation() -> None:
    env = ChaosOpsEnvironment()
    obs = env.reset(scenario=Scenario.from_type(FailureType.DB_DEADLOCK, seed=4))
    assert isinstance(obs, ChaosOpsObservation)
    assert (obs.done, obs.reward, obs.step, obs.turn_role) == (False, 0.0, 0, AgentRole.SRE)
    assert obs.view.role is AgentRole.SRE
    assert obs.message and "\n" not in obs.message
    assert "db_deadlock" not in obs.message  # the message never leaks the truth
    assert env.current_role is AgentRole.SRE
    assert env.last_breakdown is None


def test_reset_defaults_and_episode_id() -> None:
    env = ChaosOpsEnvironment()
    env.reset(seed=9, episode_id="ep-1")
    assert env.state.episode_id == "ep-1"
    assert env.state.failure_type is FailureType.DB_DEADLOCK
    assert env.state.difficulty is DifficultyTier.EASY
    assert env.world.scenario is not None and env.world.scenario.seed == 9
    env.reset()
    assert env.world.scenario.seed == 0
    first = env.state.episode_id
    env.reset()
    assert env.state.episode_id != first


def test_default_scenario_is_used_as_set() -> None:
    env = ChaosOpsEnvironment()
    default = Scenario.from_type(FailureType.DISK_FULL, seed=77, difficulty=DifficultyTier.HARD)
    env.set_default_scenario(default)
    env.reset(seed=5)
    assert env.world.scenario == default
    other = Scenario.from_type(FailureType.MEMORY_LEAK, seed=1)
    env.reset(seed=5, scenario=other)
    assert env.world.scenario == other


def test_step_overrides_role_and_advances_turns() -> None:
    env = ChaosOpsEnvironment()
    env.reset(scenario=Scenario.from_type(FailureType.DB_DEADLOCK, seed=0))
    action = act("manager", "communicate", message="hi")
    obs = env.step(action)
    assert action.role is AgentRole.MANAGER  # the caller's action is not mutated
    assert env.state.chat_history == ["[sre] hi"]
    assert obs.turn_role is AgentRole.OVERSIGHT and obs.view.role is AgentRole.OVERSIGHT
    assert obs.step == 1 and obs.reward == -2.0
    roles = [obs.turn_role]
    for _ in range(4):
        roles.append(env.step(act("sre", "noop")).turn_role)
    assert roles == [
        AgentRole.OVERSIGHT,
        AgentRole.DEV,
        AgentRole.MANAGER,
        AgentRole.SRE,
        AgentRole.OVERSIGHT,
    ]


def test_custom_turn_order() -> None:
    env = ChaosOpsEnvironment(turn_order=["dev", "manager"])
    obs = env.reset(scenario=Scenario.from_type(FailureType.DB_DEADLOCK, seed=0))
    assert obs.turn_role is AgentRole.DEV
    obs = env.step(act("sre", "restart", "db"))
    assert obs.done and env.state.resolved
    assert obs.turn_role is AgentRole.MANAGER


def test_step_accepts_a_mapping() -> None:
    env = ChaosOpsEnvironment()
    env.reset(scenario=Scenario.from_type(FailureType.DB_DEADLOCK, seed=0))
    env.step({"action_type": "communicate", "args": {"message": "x", "to": None}})
    assert env.state.chat_history == ["[sre] x"]


def test_rewards_accumulate_and_terminal_penalty() -> None:
    env = ChaosOpsEnvironment()
    env.reset(scenario=Scenario.from_type(FailureType.DB_DEADLOCK, seed=0, max_steps=3))
    rewards = []
    obs = None
    for _ in range(3):
        obs = env.step(act("sre", "noop"))
        rewards.append(obs.reward)
        assert isinstance(env.last_breakdown, StepRewardBreakdown)
        assert env.last_breakdown.total == obs.reward
    assert rewards == [-2.0, -4.0, -6.0]
    assert obs is not None and obs.done and not env.state.resolved
    assert env.state.cumulative_reward == -12.0 - 60.0
    assert "unresolved" in obs.message


def test_no_terminal_penalty_when_resolved() -> None:
    env = ChaosOpsEnvironment()
    env.reset(scenario=Scenario.from_type(FailureType.DNS_OUTAGE, seed=0))
    env.step(act("sre", "identify_root_cause", failure_type="dns_outage"))  # -2 + 30
    env.step(act("oversight", "noop"))  # -4
    obs = env.step(act("dev", "restart", "auth"))  # +100 + 10
    assert obs.done and obs.reward == 110.0
    assert env.state.cumulative_reward == 28.0 - 4.0 + 110.0


def test_miscommunication_counter_at_least_one() -> None:
    env = ChaosOpsEnvironment()
    env.reset(scenario=Scenario.from_type(FailureType.DB_DEADLOCK, seed=0))
    env.step(act("sre", "communicate", message="x", to="nobody"))  # the counter, no flag
    assert env.state.miscommunications == 1
    assert env.last_breakdown.miscommunication_penalty == 0.0
    env.step(act("sre", "communicate", message=""))  # the flag; the counter was 1 already
    assert env.state.miscommunications == 1
    env.step(act("dev", "identify_root_cause", failure_type="nope"))
    assert env.state.miscommunications == 1
    env.step(act("manager", "resolve"))  # the manager's turn: nothing
    env.step(act("sre", "resolve"))  # not the manager's: the flag and the counter
    assert env.state.miscommunications == 2
    assert env.last_breakdown.miscommunication_penalty == -20.0


def test_step_after_done_names_the_episode() -> None:
    env = ChaosOpsEnvironment()
    env.reset(scenario=Scenario.from_type(FailureType.DB_DEADLOCK, seed=0), episode_id="ep-xyz")
    env.step(act("sre", "restart", "db"))
    with pytest.raises(RuntimeError, match="ep-xyz"):
        env.step(act("oversight", "noop"))
    env.reset(episode_id="again")
    env.step(act("sre", "noop"))


def test_step_before_reset_raises() -> None:
    with pytest.raises(RuntimeError, match="reset"):
        ChaosOpsEnvironment().step(act("sre", "noop"))


def _trajectory(policy_factory, scenario: Scenario) -> list:
    env = ChaosOpsEnvironment()
    policy = policy_factory(scenario.seed)
    obs = env.reset(scenario=scenario, episode_id="fixed")
    out = [obs.model_dump()]
    while not obs.done:
        action = policy(obs, obs.turn_role)
        obs = env.step(action)
        out.append((action.model_dump(), obs.model_dump(), env.last_breakdown))
    out.append(env.state.model_dump())
    return out


@pytest.mark.parametrize("factory", [random_policy, heuristic_policy])
@pytest.mark.parametrize("failure", list(FailureType), ids=lambda f: f.value)
def test_same_scenario_same_trajectory(factory, failure: FailureType) -> None:
    scenario = Scenario.from_type(failure, seed=13, difficulty=DifficultyTier.HARD, max_steps=15)
    assert _trajectory(factory, scenario) == _trajectory(factory, scenario)


def test_root_cause_step_is_first_declaration_and_early_bonus() -> None:
    env = ChaosOpsEnvironment()
    env.reset(scenario=Scenario.from_type(FailureType.DB_DEADLOCK, seed=0))
    env.step(act("sre", "identify_root_cause", failure_type="disk_full"))  # step 1
    assert env.state.declared_root_cause_step == 1
    for _ in range(3):
        env.step(act("sre", "noop"))
    env.step(act("sre", "identify_root_cause", failure_type=" db_deadlock "))  # step 5
    assert env.state.declared_root_cause is FailureType.DB_DEADLOCK
    assert env.state.declared_root_cause_step == 1
    assert env.last_breakdown.early_root_cause_bonus == 30.0
    env.step(act("sre", "identify_root_cause", failure_type="DB_DEADLOCK"))
    assert env.last_breakdown.miscommunication_penalty == -20.0
    assert env.state.miscommunications == 1
    assert env.state.declared_root_cause is FailureType.DB_DEADLOCK


def test_late_first_declaration_gets_no_bonus() -> None:
    env = ChaosOpsEnvironment()
    env.reset(scenario=Scenario.from_type(FailureType.DB_DEADLOCK, seed=0))
    for _ in range(3):
        env.step(act("sre", "noop"))
    env.step(act("sre", "identify_root_cause", failure_type="db_deadlock"))
    assert env.state.declared_root_cause_step == 4
    assert env.last_breakdown.early_root_cause_bonus == 0.0


def test_empty_turn_order_is_refused() -> None:
    with pytest.raises(ValueError):
        ChaosOpsEnvironment(turn_order=[])
    env = ChaosOpsEnvironment(turn_order=["dev"])
    assert env.turn_order == (AgentRole.DEV,)


def test_step_accepts_a_constructed_action_with_plain_strings() -> None:
    # The world coerces plain-string action types; the environment must not then
    # fail half-way through the step (after the world already applied it).
    env = ChaosOpsEnvironment()
    env.reset()
    action = ChaosOpsAction.model_construct(role="sre", action_type="restart", target="db", args={})
    obs = env.step(action)
    assert obs.done and env.state.resolved
    assert "restart db" in obs.message


def test_step_message_never_reveals_hidden_truth() -> None:
    """Whether a flag hit the rogue or a root cause is right stays hidden from the message."""

    for flagged, cause in (("deploy_bot", "rogue_deploy_bot"), ("autoscaler", "db_deadlock")):
        env = ChaosOpsEnvironment()
        env.reset(scenario=Scenario.from_type(FailureType.ROGUE_DEPLOY_BOT, seed=1))
        sre = env.step(
            ChaosOpsAction(
                role=AgentRole.SRE,
                action_type=ActionType.IDENTIFY_ROOT_CAUSE,
                args={"failure_type": cause},
            )
        )
        ovs = env.step(
            ChaosOpsAction(
                role=AgentRole.OVERSIGHT, action_type=ActionType.FLAG_ROGUE, target=flagged
            )
        )
        for text in (sre.message.lower(), ovs.message.lower()):
            assert "confirmed" not in text and "false" not in text and "correct" not in text
