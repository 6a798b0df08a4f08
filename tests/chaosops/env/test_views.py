"""docs/world.md, "What each role sees": what each role sees; observations are snapshots."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from chaosops.agents.policies import random_policy
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import (
    AgentRole,
    ChaosOpsAction,
    ChaosOpsObservation,
    FailureType,
    RoleView,
)
from chaosops.env.world_sim import Scenario, WorldSim

from .helpers import act, make_world

NOTE = "fleet actions visible; cross-reference with alerts."


def _busy_world():
    """A hard rogue-bot world with many logs, chat lines and private messages."""
    world = make_world(FailureType.ROGUE_DEPLOY_BOT, tier="hard", seed=3)
    for i in range(10):
        world.apply_action(act("sre", "communicate", message=f"public {i}"))
    for role in ("sre", "dev", "manager", "oversight"):
        for i in range(10):
            world.apply_action(act("manager", "communicate", message=f"{role} {i}", to=role))
    return world


def test_sre_view() -> None:
    world = _busy_world()
    s = world.state
    view = world.project_view(AgentRole.SRE)
    assert view.role is AgentRole.SRE
    assert list(view.visible_metrics) == ["auth", "payments", "notifications", "db"]
    assert [x.message for x in view.visible_logs] == [x.message for x in s.all_logs[-6:]]
    assert len(view.visible_logs) == 4  # 1 injected + 3 red herrings
    assert not any(x.is_red_herring for x in view.visible_logs)
    assert any(x.is_red_herring for x in s.all_logs)  # the truth keeps the mark
    assert view.visible_alerts == s.all_alerts
    assert view.visible_fleet_actions == []
    assert view.shared_chat == [f"[sre] public {i}" for i in range(2, 10)]
    assert view.private_inbox == [f"[manager -> sre] sre {i}" for i in range(2, 10)]
    assert view.private_note is None


def test_dev_sees_last_three_of_six_logs() -> None:
    world = make_world(FailureType.CASCADE, tier="hard", seed=1)
    for _ in range(3):
        world.apply_action(act("dev", "restart", "auth"))
    s = world.state
    assert len(s.all_logs) == 7
    dev = world.project_view("dev")
    sre = world.project_view("sre")
    assert [x.message for x in sre.visible_logs] == [x.message for x in s.all_logs[-6:]]
    assert [x.message for x in dev.visible_logs] == [x.message for x in s.all_logs[-3:]]
    assert not any(x.is_red_herring for x in dev.visible_logs + sre.visible_logs)
    assert list(dev.visible_metrics) == ["auth", "payments", "notifications", "db"]
    assert dev.visible_fleet_actions == [] and dev.private_note is None


def test_manager_view() -> None:
    world = _busy_world()
    view = world.project_view(AgentRole.MANAGER)
    assert view.visible_metrics == {} and view.visible_logs == []
    assert view.visible_fleet_actions == [] and view.private_note is None
    assert len(view.visible_alerts) == 1
    assert view.private_inbox == [f"[manager -> manager] manager {i}" for i in range(2, 10)]


def test_oversight_view_clears_malicious_mark() -> None:
    world = _busy_world()
    view = world.project_view(AgentRole.OVERSIGHT)
    assert [(f.agent_name, f.action, f.target, f.step) for f in view.visible_fleet_actions] == [
        ("deploy_bot", "push_config", "payments", 0)
    ]
    assert not view.visible_fleet_actions[0].was_malicious
    assert world.state.fleet_actions[0].was_malicious
    assert view.private_note == NOTE
    assert len(view.visible_metrics) == 4 and len(view.visible_logs) == 4


def test_oversight_note_absent_without_fleet_actions() -> None:
    world = make_world(FailureType.DB_DEADLOCK)
    view = world.project_view("oversight")
    assert view.visible_fleet_actions == [] and view.private_note is None


@pytest.mark.parametrize("role", list(AgentRole))
def test_no_role_sees_another_inbox(role: AgentRole) -> None:
    world = _busy_world()
    view = world.project_view(role)
    assert all(line.startswith(f"[manager -> {role.value}] ") for line in view.private_inbox)
    others = [r.value for r in AgentRole if r is not role]
    text = repr(view.model_dump())
    for other in others:
        assert f"-> {other}]" not in text


def test_view_is_a_valid_model() -> None:
    world = _busy_world()
    for role in AgentRole:
        view = world.project_view(role)
        assert RoleView.model_validate(view.model_dump()) == view


def test_an_observation_holds_the_view_project_view_gives() -> None:
    """The environment validates an observation and its view in one go, from
    `view_fields`: the view is the one `project_view` builds, fields all set."""
    env = ChaosOpsEnvironment()
    scenario = Scenario.from_type(FailureType.ROGUE_DEPLOY_BOT, seed=4)
    obs = env.reset(scenario=scenario)
    policy = random_policy(seed=4)
    while True:
        view = env.world.project_view(obs.turn_role)
        assert obs.view == view
        assert RoleView.model_validate(env.world.view_fields(obs.turn_role)) == view
        assert obs.view.model_fields_set == set(RoleView.model_fields)
        if obs.done:
            break
        obs = env.step(policy(obs, obs.turn_role))
    assert env.state.step_count > 1


def test_observation_is_a_snapshot() -> None:
    env = ChaosOpsEnvironment()
    obs = env.reset(scenario=Scenario.from_type(FailureType.MEMORY_LEAK, seed=0))
    frozen = obs.model_dump()
    nxt = env.step(act("sre", "communicate", message="hello all"))
    after_one = nxt.model_dump()
    env.step(act("oversight", "communicate", message="psst", to="sre"))
    env.step(act("dev", "restart", "db"))  # wrong fix, memory keeps growing
    env.step(act("manager", "communicate", message="status?"))
    world = env.world
    world.state.services["notifications"].memory_mb = 9999.0
    world.state.services["auth"].health = world.state.services["db"].health
    world.state.chat_history.append("late line")
    world.state.private_chat.setdefault("sre", []).append("late private")
    world.state.all_alerts.clear()
    assert obs.model_dump() == frozen
    assert nxt.model_dump() == after_one
    assert world.project_view("sre").private_inbox == [
        "[oversight -> sre] psst",
        "late private",
    ]


def test_views_share_unchanged_snapshots_never_the_truth() -> None:
    world = make_world(FailureType.DB_DEADLOCK)
    a = world.project_view("sre")
    b = world.project_view("dev")
    # Unchanged metrics are one read-only snapshot, never the live object.
    assert a.visible_metrics["db"] is b.visible_metrics["db"]
    assert a.visible_metrics["db"] is not world.state.services["db"]
    assert a.visible_metrics["db"] == world.state.services["db"]
    # A policy that scribbles on its view changes neither the truth nor later views.
    a.visible_metrics["db"].cpu_pct = 1.0
    assert world.state.services["db"].cpu_pct == 22.0
    assert world.project_view("sre").visible_metrics["db"].cpu_pct == 22.0
    # A service whose truth changed gets a fresh snapshot; the old view keeps its own.
    before = world.project_view("sre")
    world.state.services["db"].latency_ms = 99.0
    after = world.project_view("sre")
    assert before.visible_metrics["db"].latency_ms == 1800.0
    assert after.visible_metrics["db"].latency_ms == 99.0
    assert after.visible_metrics["auth"] is before.visible_metrics["auth"]


def test_views_follow_directly_appended_truth() -> None:
    """Tools may append to the state's lists directly; views still clear hidden marks."""
    world = make_world(FailureType.DB_DEADLOCK)
    herring = world.state.all_logs[0].model_copy(update={"is_red_herring": True, "message": "x"})
    world.state.all_logs.append(herring)
    view = world.project_view("sre")
    assert view.visible_logs[-1].message == "x" and not view.visible_logs[-1].is_red_herring


def test_lean_views_behave_like_validated_models() -> None:
    """Views built without validation report every field as set, like a validated model."""
    world = make_world(FailureType.ROGUE_DEPLOY_BOT)
    view = world.project_view("oversight")
    assert view.model_fields_set == set(RoleView.model_fields)
    assert view.model_dump(exclude_unset=True) == view.model_dump()
    metrics = view.visible_metrics["payments"]
    assert metrics.model_dump(exclude_unset=True) == metrics.model_dump()
    metrics.cpu_pct = 50.0  # assignment keeps working and changes no other instance
    assert world.project_view("sre").visible_metrics["payments"].cpu_pct != 50.0


def test_views_follow_a_tool_that_replaces_the_state_or_its_parts() -> None:
    """The environment exposes `world` (docs/world.md, "The environment") to tools
    that project views directly: the views' reuse of the previous one must not
    hide a state a tool replaced."""
    from chaosops.env.models import Alert, ChaosOpsState, LogLine

    world = WorldSim()
    world.reset(Scenario.from_type(FailureType.DB_DEADLOCK, seed=0))
    assert list(world.project_view("sre").visible_metrics) == ["auth", "payments",
                                                               "notifications", "db"]  # fmt: skip
    del world.state.services["db"]
    assert "db" not in world.project_view("sre").visible_metrics
    world.state.all_logs = [LogLine(timestamp=0, service="db", level="INFO", message=m)
                            for m in ("X1", "X2")]  # fmt: skip
    assert [line.message for line in world.project_view("sre").visible_logs] == ["X1", "X2"]
    replaced = Alert(service="db", severity="warn", message="REPLACED", triggered_at_step=0)
    world.state.all_alerts = [replaced]
    assert [a.message for a in world.project_view("sre").visible_alerts] == ["REPLACED"]
    world.state = ChaosOpsState(step_count=3)
    view = world.project_view("sre")
    assert view.visible_metrics == {} and view.visible_logs == [] and view.visible_alerts == []


def test_a_replicas_value_whose_int_raises_anything_is_a_wrong_fix() -> None:
    class Odd:
        def __int__(self) -> int:
            raise RuntimeError("boom")

    world = WorldSim()
    world.reset(Scenario.from_type(FailureType.DB_DEADLOCK, seed=0))
    flags = world.apply_action(
        ChaosOpsAction(role="dev", action_type="scale", target="auth", args={"replicas": Odd()})
    )
    assert flags.get("wrong_fix") and world.state.wrong_fixes == 1


def test_the_step_message_stays_on_one_line() -> None:
    env = ChaosOpsEnvironment()
    env.reset()
    obs = env.step(ChaosOpsAction(role="sre", action_type="restart", target="db\nRESOLVED"))
    assert "\n" not in obs.message and "'db\\nRESOLVED'" in obs.message


def _dump(obs: ChaosOpsObservation) -> dict[str, Any]:
    return copy.deepcopy(obs.model_dump())


@pytest.mark.parametrize("ft", list(FailureType))
def test_observations_stay_snapshots_over_an_episode(ft: FailureType) -> None:
    env = ChaosOpsEnvironment()
    obs = env.reset(scenario=Scenario.from_type(ft, seed=0, difficulty="hard", max_steps=30))
    kept = [(obs, _dump(obs))]
    pol = random_policy(seed=4)
    talk = 0
    while not obs.done:
        role = obs.turn_role
        if talk % 3 == 0:
            action = act(role, "communicate", message=f"m{talk}", to="all")
        elif talk % 3 == 1:
            action = act(role, "communicate", message=f"p{talk}", to=role.value)
        else:
            action = pol(obs, role)
        talk += 1
        obs = env.step(action)
        kept.append((obs, _dump(obs)))
    for held, dumped in kept:
        assert held.model_dump() == dumped
    # nothing in a view is the live state's container
    s = env.state
    for held, _ in kept:
        v = held.view
        assert v.shared_chat is not s.chat_history
        assert v.visible_alerts is not s.all_alerts
        for inbox in s.private_chat.values():
            assert v.private_inbox is not inbox
        for name, m in v.visible_metrics.items():
            assert m is not s.services[name]
