"""The step's cheap paths give exactly what the pydantic / dataclass paths they replace give."""

from __future__ import annotations

import uuid

import pytest

from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import (
    ActionType,
    AgentRole,
    ChaosOpsAction,
    ChaosOpsState,
    FailureType,
    RoleView,
    ServiceMetrics,
)
from chaosops.env.world_sim import (
    FLAG_NAMES,
    Scenario,
    _new_episode_id,
    copy_with,
    fast_construct,
    set_field,
)
from chaosops.rewards.reward_fn import (
    QUIET_CACHE_STEPS,
    StepRewardBreakdown,
    _breakdown,
    compute_step_reward,
    step_reward,
)

from .helpers import make_world


def _slots(model):
    return (
        type(model),
        model.__dict__,
        model.model_fields_set,
        model.__pydantic_extra__,
        model.__pydantic_private__,
    )


def test_set_field_matches_setattr_on_fast_constructed_models() -> None:
    world = make_world(FailureType.MEMORY_LEAK)
    m = world.state.services["db"]
    twin = fast_construct(ServiceMetrics, m.__dict__.copy())
    set_field(m, "memory_mb", 999.0)
    twin.memory_mb = 999.0
    assert _slots(m) == _slots(twin)
    set_field(world.state, "step_count", 7)
    assert world.state.step_count == 7 and "step_count" in world.state.model_fields_set


def test_set_field_falls_back_to_setattr_for_unset_fields() -> None:
    state = ChaosOpsState()
    assert state.model_fields_set == set()
    set_field(state, "cumulative_reward", -3.0)
    assert state.cumulative_reward == -3.0
    assert state.model_fields_set == {"cumulative_reward"}


@pytest.mark.parametrize("built", ["validated", "construct", "fast"])
def test_copy_with_matches_model_copy(built: str) -> None:
    values = {
        "role": AgentRole.SRE,
        "action_type": ActionType.RESTART,
        "target": "db",
        "args": {"x": 1},
    }
    if built == "validated":
        action = ChaosOpsAction(role="sre", action_type="restart", target="db", args={"x": 1})
    elif built == "construct":
        action = ChaosOpsAction.model_construct(action_type=ActionType.NOOP)
    else:
        action = fast_construct(ChaosOpsAction, values)
    fields_before = set(action.model_fields_set)
    ours = copy_with(action, "role", AgentRole.DEV)
    theirs = action.model_copy(update={"role": AgentRole.DEV})
    assert _slots(ours) == _slots(theirs)
    assert list(ours.__dict__) == list(theirs.__dict__)
    assert ours.model_fields_set is not action.model_fields_set
    assert action.model_fields_set == fields_before  # the original is untouched
    assert ours.args is action.args or built == "construct"  # shallow, as model_copy


def test_copy_with_hands_unusual_models_to_model_copy() -> None:
    view = RoleView(role=AgentRole.SRE)
    object.__setattr__(view, "__pydantic_private__", {"x": 1})
    copied = copy_with(view, "role", AgentRole.DEV)
    assert copied.role is AgentRole.DEV and copied.__pydantic_private__ == {"x": 1}


def test_breakdown_builds_the_same_dataclass() -> None:
    parts = [float(i) - 3.5 for i in range(9)]
    ours = _breakdown(*parts)
    assert type(ours) is StepRewardBreakdown
    assert ours == StepRewardBreakdown(*parts)
    assert hash(ours) == hash(StepRewardBreakdown(*parts))
    assert repr(ours) == repr(StepRewardBreakdown(*parts))
    with pytest.raises(AttributeError):
        ours.mttr_penalty = 1.0  # type: ignore[misc]


@pytest.mark.parametrize("step", [0, 1, 5, QUIET_CACHE_STEPS - 1, QUIET_CACHE_STEPS, 10_000])
@pytest.mark.parametrize("true_flag", [None, *FLAG_NAMES])
def test_step_reward_matches_compute_step_reward(step: int, true_flag: str | None) -> None:
    state = ChaosOpsState(step_count=step, declared_root_cause_step=2)
    flags = dict.fromkeys(FLAG_NAMES, False)
    if true_flag is not None:
        flags[true_flag] = True
    for _ in range(2):  # a cache miss, then (maybe) a hit
        breakdown, total = step_reward(state, flags)
        expected = compute_step_reward(state=state, outcome_flags=flags)
        assert breakdown == expected and repr(breakdown) == repr(expected)
        assert repr(total) == repr(expected.total)


def test_new_episode_id_is_a_uuid4_string() -> None:
    ids = {_new_episode_id() for _ in range(1000)}
    assert len(ids) == 1000
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_reset_passes_the_episode_id_through() -> None:
    env = ChaosOpsEnvironment()
    env.reset(episode_id="given")
    assert env.state.episode_id == "given"
    env.reset()
    assert str(uuid.UUID(env.state.episode_id)) == env.state.episode_id
    world = make_world(FailureType.DB_DEADLOCK)
    assert world.reset(Scenario.from_type("cascade", seed=1), "x").episode_id == "x"


def test_step_messages_format_rewards_like_the_format_spec() -> None:
    env = ChaosOpsEnvironment()
    for max_steps in (3, 40):
        obs = env.reset(scenario=Scenario.from_type("memory_leak", seed=0, max_steps=max_steps))
        while not obs.done:
            obs = env.step({"action_type": "noop"})
            assert obs.message.endswith(f"; reward {obs.reward:+.1f}")
