"""The scripted policies (docs/world.md, "Scripted policies") draw exactly as
specified; the oracle plays its table and resolves every failure."""

from __future__ import annotations

import random
from typing import Any

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


# References written from docs/world.md, "Scripted policies" (draw order,
# strings, ordering, tie-breaking), checked over whole episodes of every
# failure and tier.


def _ref_random(seed: int):
    rng = random.Random(seed)

    def policy(obs: ChaosOpsObservation, role: AgentRole) -> dict[str, Any]:
        kind = rng.choice(("noop", "communicate", "restart", "rollback", "scale"))
        target = None
        args: dict[str, Any] = {}
        if kind in ("restart", "rollback", "scale"):
            target = rng.choice(("auth", "payments", "notifications", "db"))
        if kind == "scale":
            args["replicas"] = rng.choice([1, 2, 3, 4, 5])
        if kind == "communicate":
            args["message"] = rng.choice(
                [
                    "checking metrics",
                    "someone should look at this",
                    "i'll try a rollback",
                    "standing by",
                ]
            )
        return {"action_type": kind, "target": target, "args": args}

    return policy


def _ref_heuristic(seed: int):
    rng = random.Random(seed)
    rank = {"down": 0, "critical": 1, "degraded": 2}

    def policy(obs: ChaosOpsObservation, role: AgentRole) -> dict[str, Any]:
        view = obs.view
        role_v = AgentRole(role).value
        if role_v == "manager":
            if any("resolved" in m.lower() or "healthy" in m.lower() for m in view.shared_chat):
                return {"action_type": "resolve", "target": None, "args": {}}
            if not view.visible_alerts:
                return {"action_type": "noop", "target": None, "args": {}}
            return {
                "action_type": "communicate",
                "target": None,
                "args": {
                    "message": "SRE: diagnose. Dev: stage a rollback. Oversight: watch the fleet."
                },
            }
        if role_v == "oversight":
            for rec in view.visible_fleet_actions:
                if rec.agent_name in ("autoscaler", "load_balancer", "deploy_bot"):
                    return {"action_type": "flag_rogue", "target": rec.agent_name, "args": {}}
            return {
                "action_type": "communicate",
                "target": None,
                "args": {"message": "no rogue agent activity detected"},
            }
        bad = [
            (i, name, m)
            for i, (name, m) in enumerate(view.visible_metrics.items())
            if m.health.value != "healthy"
        ]
        if not bad:
            return {
                "action_type": "communicate",
                "target": None,
                "args": {"message": "systems nominal from my view"},
            }
        bad.sort(key=lambda t: (rank[t[2].health.value], t[0]))
        _, name, m = bad[0]
        if role_v == "dev" and any("rolled out" in ln.message.lower() for ln in view.visible_logs):
            return {"action_type": "rollback", "target": name, "args": {}}
        if m.replicas < 3 and m.cpu_pct > 80:
            return {"action_type": "scale", "target": name, "args": {"replicas": 4}}
        if rng.random() < 0.15:
            return {
                "action_type": "communicate",
                "target": None,
                "args": {"message": f"investigating {name}"},
            }
        return {"action_type": "restart", "target": name, "args": {}}

    return policy


def _as_json(action) -> dict[str, Any]:
    return {
        "action_type": ActionType(action.action_type).value,
        "target": action.target,
        "args": dict(action.args),
    }


ALL_CASES = [
    (ft, tier, seed)
    for ft in FailureType
    for tier in DifficultyTier
    for seed in (0, 1, 7, 97, 1234)
]


@pytest.mark.parametrize(
    ("factory", "reference"),
    [(random_policy, _ref_random), (heuristic_policy, _ref_heuristic)],
    ids=["random", "heuristic"],
)
def test_policies_match_spec_reference(factory, reference) -> None:
    for ft, tier, seed in ALL_CASES:
        env = ChaosOpsEnvironment()
        obs = env.reset(scenario=Scenario.from_type(ft, seed=seed, difficulty=tier))
        pol, ref = factory(seed=seed), reference(seed)
        while True:
            role = obs.turn_role
            action = pol(obs, role)
            assert _as_json(action) == ref(obs, role), (ft, tier, seed, obs.step, role)
            obs = env.step(action)
            if obs.done:
                break


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


ORACLE_PLANS = {
    FailureType.DB_DEADLOCK: {"dev": ("restart", "db", {})},
    FailureType.MEMORY_LEAK: {"dev": ("restart", "notifications", {})},
    FailureType.BAD_CONFIG_PUSH: {"dev": ("rollback", "auth", {})},
    FailureType.AUTOSCALER_COST_CUT: {
        "oversight": ("flag_rogue", "autoscaler", {}),
        "dev": ("scale", "payments", {"replicas": 4}),
    },
    FailureType.MISROUTED_TRAFFIC: {
        "oversight": ("flag_rogue", "load_balancer", {}),
        "manager": ("escalate", None, {}),
    },
    FailureType.CASCADE: {"dev": ("restart", "db", {}), "manager": ("resolve", None, {})},
    FailureType.DNS_OUTAGE: {"dev": ("restart", "auth", {})},
    FailureType.DISK_FULL: {"dev": ("scale", "db", {"replicas": 2})},
    FailureType.ROGUE_DEPLOY_BOT: {
        "oversight": ("flag_rogue", "deploy_bot", {}),
        "dev": ("rollback", "payments", {}),
    },
}


@pytest.mark.parametrize("failure", list(FailureType), ids=lambda f: f.value)
def test_oracle_plays_its_table_the_same_each_time_and_noop_without_plan(
    failure: FailureType,
) -> None:
    plan = {**ORACLE_PLANS[failure], "sre": ("identify_root_cause", None,
                                             {"failure_type": failure.value})}  # fmt: skip
    policy = oracle_policy(failure)
    for _ in range(3):
        for role in AgentRole:
            kind, target, args = plan.get(role.value, ("noop", None, {}))
            assert _summary(policy(_obs(), role)) == (role, ActionType(kind), target, args)
    a = policy(_obs(), AgentRole.SRE)
    a.args["failure_type"] = "mutated"  # each call gets its own action
    assert policy(_obs(), AgentRole.SRE).args == {"failure_type": failure.value}


def test_policy_actions_are_valid_models() -> None:
    for policy in (random_policy(1), heuristic_policy(1), oracle_policy("cascade")):
        for role in ROLES:
            action = policy(_obs(RoleView(role=role)), role)
            assert ChaosOpsAction.model_validate(action.model_dump()) == action
