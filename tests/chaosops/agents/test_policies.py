"""SPEC section 11: the scripted policies draw exactly as specified; the oracle resolves."""

from __future__ import annotations

import random

import pytest

from chaosops.agents.policies import heuristic_policy, oracle_policy, random_policy
from chaosops.curriculum.generator import scenarios_for_tier
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import (
    ActionType,
    AgentRole,
    ChaosOpsAction,
    ChaosOpsObservation,
    DifficultyTier,
    FailureType,
    FleetAgentLog,
    LogLine,
    RoleView,
    ServiceMetrics,
    ServiceName,
)
from chaosops.env.world_sim import Scenario

ROLES = list(AgentRole)
MESSAGES = ["checking metrics", "someone should look at this", "i'll try a rollback", "standing by"]


def _obs(view: RoleView | None = None) -> ChaosOpsObservation:
    view = view or RoleView(role=AgentRole.SRE)
    return ChaosOpsObservation(view=view, step=0, turn_role=view.role)


def _summary(a: ChaosOpsAction) -> tuple:
    return (a.role, a.action_type, a.target, dict(a.args))


def test_random_policy_draw_order() -> None:
    for seed in (0, 1, 42):
        policy = random_policy(seed=seed)
        rng = random.Random(seed)
        for i in range(300):
            role = ROLES[i % 4]
            kind = rng.choice(
                (
                    ActionType.NOOP,
                    ActionType.COMMUNICATE,
                    ActionType.RESTART,
                    ActionType.ROLLBACK,
                    ActionType.SCALE,
                )
            )
            target = None
            args: dict = {}
            if kind in (ActionType.RESTART, ActionType.ROLLBACK, ActionType.SCALE):
                target = rng.choice(("auth", "payments", "notifications", "db"))
            if kind is ActionType.SCALE:
                args["replicas"] = rng.choice([1, 2, 3, 4, 5])
            if kind is ActionType.COMMUNICATE:
                args["message"] = rng.choice(MESSAGES)
            assert _summary(policy(_obs(), role)) == (role, kind, target, args)


def test_factories_return_fresh_policies() -> None:
    a, b = random_policy(seed=3), random_policy(seed=3)
    first = [_summary(a(_obs(), AgentRole.SRE)) for _ in range(20)]
    assert [_summary(b(_obs(), AgentRole.SRE)) for _ in range(20)] == first


def _metrics(health: str, *, replicas: int = 3, cpu: float = 22.0) -> ServiceMetrics:
    return ServiceMetrics(
        cpu_pct=cpu,
        memory_mb=340,
        latency_ms=45,
        error_rate=0.01,
        replicas=replicas,
        health=health,
    )


def _log(message: str) -> LogLine:
    return LogLine(timestamp=0.0, service=ServiceName.AUTH, level="INFO", message=message)


def test_heuristic_manager() -> None:
    policy = heuristic_policy(seed=0)
    view = RoleView(role=AgentRole.MANAGER, shared_chat=["[sre] DB is HEALTHY again"])
    assert policy(_obs(view), AgentRole.MANAGER).action_type is ActionType.RESOLVE
    view = RoleView(role=AgentRole.MANAGER, shared_chat=["[sre] Resolved it"])
    assert policy(_obs(view), AgentRole.MANAGER).action_type is ActionType.RESOLVE
    view = RoleView(role=AgentRole.MANAGER, shared_chat=["[sre] looking"])
    assert policy(_obs(view), AgentRole.MANAGER).action_type is ActionType.NOOP
    from chaosops.env.models import Alert

    alert = Alert(service=ServiceName.DB, severity="page", message="x", triggered_at_step=0)
    view = RoleView(role=AgentRole.MANAGER, visible_alerts=[alert])
    action = policy(_obs(view), AgentRole.MANAGER)
    assert _summary(action) == (
        AgentRole.MANAGER,
        ActionType.COMMUNICATE,
        None,
        {"message": "SRE: diagnose. Dev: stage a rollback. Oversight: watch the fleet."},
    )


def test_heuristic_oversight() -> None:
    policy = heuristic_policy(seed=0)
    fleet = [
        FleetAgentLog(agent_name="cron", action="x", target="db", step=0),
        FleetAgentLog(agent_name="load_balancer", action="y", target="payments", step=1),
        FleetAgentLog(agent_name="autoscaler", action="z", target="payments", step=2),
    ]
    view = RoleView(role=AgentRole.OVERSIGHT, visible_fleet_actions=fleet)
    action = policy(_obs(view), AgentRole.OVERSIGHT)
    assert _summary(action) == (AgentRole.OVERSIGHT, ActionType.FLAG_ROGUE, "load_balancer", {})
    action = policy(_obs(RoleView(role=AgentRole.OVERSIGHT)), AgentRole.OVERSIGHT)
    assert _summary(action) == (
        AgentRole.OVERSIGHT,
        ActionType.COMMUNICATE,
        None,
        {"message": "no rogue agent activity detected"},
    )


def test_heuristic_responders_without_draws() -> None:
    policy = heuristic_policy(seed=0)
    healthy = {n: _metrics("healthy") for n in ("auth", "payments", "notifications", "db")}
    for role in (AgentRole.SRE, AgentRole.DEV):
        action = policy(_obs(RoleView(role=role, visible_metrics=healthy)), role)
        assert _summary(action) == (
            role,
            ActionType.COMMUNICATE,
            None,
            {"message": "systems nominal from my view"},
        )
    metrics = {
        "auth": _metrics("degraded"),
        "payments": _metrics("critical", replicas=1, cpu=94.0),
        "notifications": _metrics("down"),
        "db": _metrics("critical"),
    }
    logs = [_log("config v1 ROLLED OUT 3s ago")]
    view = RoleView(role=AgentRole.DEV, visible_metrics=metrics, visible_logs=logs)
    assert _summary(policy(_obs(view), AgentRole.DEV)) == (
        AgentRole.DEV,
        ActionType.ROLLBACK,
        "notifications",
        {},
    )
    # worst first with ties in view order: payments before db; scale rule applies
    metrics["notifications"] = _metrics("healthy")
    view = RoleView(role=AgentRole.SRE, visible_metrics=metrics, visible_logs=logs)
    assert _summary(policy(_obs(view), AgentRole.SRE)) == (
        AgentRole.SRE,
        ActionType.SCALE,
        "payments",
        {"replicas": 4},
    )
    # the rng was never drawn: a fresh Random(0) still matches the policy's next draw
    rng = random.Random(0)
    metrics["payments"] = _metrics("critical", replicas=3, cpu=94.0)
    view = RoleView(role=AgentRole.SRE, visible_metrics=metrics)
    expected_kind = ActionType.COMMUNICATE if rng.random() < 0.15 else ActionType.RESTART
    assert policy(_obs(view), AgentRole.SRE).action_type is expected_kind


def test_heuristic_draw_order() -> None:
    metrics = {
        "auth": _metrics("degraded"),
        "payments": _metrics("healthy"),
        "notifications": _metrics("healthy"),
        "db": _metrics("critical"),
    }
    for seed in (0, 7, 123):
        policy = heuristic_policy(seed=seed)
        rng = random.Random(seed)
        seen = set()
        for i in range(200):
            role = (AgentRole.SRE, AgentRole.DEV)[i % 2]
            view = RoleView(role=role, visible_metrics=metrics)
            action = policy(_obs(view), role)
            if rng.random() < 0.15:
                expected = (role, ActionType.COMMUNICATE, None, {"message": "investigating db"})
            else:
                expected = (role, ActionType.RESTART, "db", {})
            assert _summary(action) == expected
            seen.add(action.action_type)
            # manager and oversight turns never draw
            policy(_obs(RoleView(role=AgentRole.MANAGER)), AgentRole.MANAGER)
            policy(_obs(RoleView(role=AgentRole.OVERSIGHT)), AgentRole.OVERSIGHT)
        assert seen == {ActionType.COMMUNICATE, ActionType.RESTART}


def _run(policy, scenario: Scenario) -> ChaosOpsEnvironment:
    env = ChaosOpsEnvironment()
    obs = env.reset(scenario=scenario)
    while not obs.done:
        obs = env.step(policy(obs, obs.turn_role))
    return env


@pytest.mark.parametrize("tier", list(DifficultyTier), ids=lambda t: t.value)
@pytest.mark.parametrize("failure", list(FailureType), ids=lambda f: f.value)
def test_oracle_resolves_every_failure(tier: DifficultyTier, failure: FailureType) -> None:
    from chaosops.curriculum.generator import TIER_MAX_STEPS

    scenario = Scenario.from_type(failure, seed=5, difficulty=tier, max_steps=TIER_MAX_STEPS[tier])
    env = _run(oracle_policy(failure), scenario)
    assert env.state.resolved
    assert env.state.wrong_fixes == 0
    assert env.state.declared_root_cause is failure
    if failure.is_rogue_agent:
        assert env.state.oversight_flags[0] == scenario.rogue_fleet_agent
    assert env.state.cumulative_reward > 0


def test_oracle_resolves_canonical_suites() -> None:
    for tier in DifficultyTier:
        for scenario in scenarios_for_tier(tier, episodes_per_type=5):
            assert _run(oracle_policy(scenario.failure_type), scenario).state.resolved


def test_oracle_plays_the_same_action_and_noop_without_plan() -> None:
    policy = oracle_policy(FailureType.MISROUTED_TRAFFIC)
    expected = {
        AgentRole.SRE: (
            ActionType.IDENTIFY_ROOT_CAUSE,
            None,
            {"failure_type": "misrouted_traffic"},
        ),
        AgentRole.OVERSIGHT: (ActionType.FLAG_ROGUE, "load_balancer", {}),
        AgentRole.DEV: (ActionType.NOOP, None, {}),
        AgentRole.MANAGER: (ActionType.ESCALATE, None, {}),
    }
    for _ in range(3):
        for role, (kind, target, args) in expected.items():
            assert _summary(policy(_obs(), role)) == (role, kind, target, args)
    a = policy(_obs(), AgentRole.SRE)
    a.args["failure_type"] = "mutated"
    assert policy(_obs(), AgentRole.SRE).args == {"failure_type": "misrouted_traffic"}


def test_policy_actions_are_valid_models() -> None:
    for policy in (random_policy(1), heuristic_policy(1), oracle_policy("cascade")):
        for role in ROLES:
            action = policy(_obs(RoleView(role=role)), role)
            assert ChaosOpsAction.model_validate(action.model_dump()) == action
