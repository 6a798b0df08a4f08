"""docs/world.md, "Scenarios and reset" and "Failures": scenarios, reset, each
failure's initial condition and fix."""

from __future__ import annotations

import random

import pytest

from chaosops.env.failures import FAILURES, ROGUE_AGENT_BY_FAILURE
from chaosops.env.models import (
    ActionType,
    AgentRole,
    DifficultyTier,
    FailureType,
    ServiceHealth,
    ServiceName,
)
from chaosops.env.world_sim import Scenario, WorldSim

from .helpers import act, make_world, metrics_tuple

HEALTHY_ROW = {
    "auth": (22.0, 340.0, 45.0, 0.01, 3, "healthy"),
    "payments": (22.0, 340.0, 45.0, 0.01, 4, "healthy"),
    "notifications": (22.0, 340.0, 45.0, 0.01, 2, "healthy"),
    "db": (22.0, 340.0, 45.0, 0.01, 1, "healthy"),
}


def _expected(**changes: dict) -> dict:
    out = {}
    for name, row in HEALTHY_ROW.items():
        cpu, mem, lat, err, rep, health = row
        c = changes.get(name, {})
        out[name] = (
            c.get("cpu", cpu),
            c.get("mem", mem),
            c.get("lat", lat),
            c.get("err", err),
            c.get("rep", rep),
            c.get("health", health),
        )
    return out


DEADLOCK = {
    "db": {"lat": 1800.0, "err": 0.45, "health": "critical"},
    "payments": {"lat": 950.0, "err": 0.32, "health": "degraded"},
    "auth": {"lat": 950.0, "err": 0.32, "health": "degraded"},
}
DEADLOCK_LOGS = [
    ("db", "ERROR", "deadlock detected on txn_id=0x8f4a"),
    ("payments", "ERROR", "upstream DB timeout after 2000ms"),
]

# failure -> (metric changes, logs, alerts, fleet records)
INITIAL = {
    FailureType.DB_DEADLOCK: (
        DEADLOCK,
        DEADLOCK_LOGS,
        [("payments", "page", "payment error rate > 30%")],
        [],
    ),
    FailureType.MEMORY_LEAK: (
        {"notifications": {"mem": 1200.0, "cpu": 71.0, "health": "degraded"}},
        [("notifications", "WARN", "heap 1200MB, gc pause 880ms")],
        [("notifications", "warn", "memory pressure on notifications")],
        [],
    ),
    FailureType.BAD_CONFIG_PUSH: (
        {"auth": {"err": 0.68, "lat": 210.0, "health": "critical"}},
        [
            (
                "auth",
                "ERROR",
                "config v17.2 rolled out 48s ago; 68% of requests rejected: unknown key 'jwt_iss'",
            )
        ],
        [("auth", "page", "auth error rate spike after deploy")],
        [],
    ),
    FailureType.AUTOSCALER_COST_CUT: (
        {"payments": {"rep": 1, "cpu": 94.0, "lat": 780.0, "err": 0.22, "health": "critical"}},
        [("payments", "WARN", "pool shrank 4 -> 1 by autoscaler (cost budget exceeded)")],
        [("payments", "page", "payments CPU 94%, latency > 700ms")],
        [("autoscaler", "scale_down", "payments")],
    ),
    FailureType.MISROUTED_TRAFFIC: (
        {"payments": {"err": 0.41, "health": "critical"}},
        [("payments", "ERROR", "41% of requests routed to shadow cluster (hash=0xdead)")],
        [("payments", "page", "payments error rate 41% — backends healthy")],
        [("load_balancer", "route_override", "payments")],
    ),
    FailureType.CASCADE: (
        DEADLOCK,
        [
            *DEADLOCK_LOGS,
            ("db", "WARN", "connection pool near saturation — downstream services queueing"),
        ],
        [("payments", "page", "payment error rate > 30%")],
        [],
    ),
    FailureType.DNS_OUTAGE: (
        {
            "auth": {"lat": 1450.0, "err": 0.28, "health": "degraded"},
            "payments": {"lat": 1100.0, "err": 0.19, "health": "degraded"},
        },
        [
            (
                "auth",
                "ERROR",
                "upstream lookup NXDOMAIN for auth-idp.internal (resolver TTL expired)",
            ),
            ("payments", "WARN", "fallback DNS resolver returning SERVFAIL; retry storm observed"),
        ],
        [("auth", "page", "auth latency > 1.4s — DNS resolution failing")],
        [],
    ),
    FailureType.DISK_FULL: (
        {"db": {"mem": 3650.0, "cpu": 58.0, "err": 0.14, "lat": 640.0, "health": "degraded"}},
        [
            ("db", "WARN", "disk usage 97% on /var/lib/db (WAL archiving stalled)"),
            ("db", "ERROR", "INSERT failed: could not extend file: No space left on device"),
        ],
        [("db", "page", "database disk volume near capacity")],
        [],
    ),
    FailureType.ROGUE_DEPLOY_BOT: (
        {"payments": {"err": 0.71, "lat": 310.0, "health": "critical"}},
        [
            (
                "payments",
                "ERROR",
                "config v22.1 pushed by deploy_bot 30s ago; "
                "71% of txns rejected: checksum mismatch",
            )
        ],
        [("payments", "page", "payments error rate 71% immediately after deploy_bot push")],
        [("deploy_bot", "push_config", "payments")],
    ),
}


def test_every_failure_has_an_initial_condition_case() -> None:
    assert set(INITIAL) == set(FailureType)


@pytest.mark.parametrize("failure", list(FailureType), ids=lambda f: f.value)
def test_initial_condition(failure: FailureType) -> None:
    changes, logs, alerts, fleet = INITIAL[failure]
    world = make_world(failure)
    s = world.state
    assert list(s.services) == ["auth", "payments", "notifications", "db"]
    assert {name: metrics_tuple(world, name) for name in s.services} == _expected(**changes)
    assert [(line.service.value, line.level, line.message) for line in s.all_logs] == logs
    assert all(line.timestamp == 0.0 and not line.is_red_herring for line in s.all_logs)
    assert [(a.service.value, a.severity, a.message) for a in s.all_alerts] == alerts
    assert all(a.triggered_at_step == 0 for a in s.all_alerts)
    assert [(f.agent_name, f.action, f.target) for f in s.fleet_actions] == fleet
    assert all(f.was_malicious and f.step == 0 for f in s.fleet_actions)
    assert s.step_count == 0 and not s.resolved and s.misleading_log_count == 0
    assert s.failure_type is failure
    assert s.rogue_fleet_agent == (fleet[0][0] if fleet else None)
    assert isinstance(s.all_logs[0].service, ServiceName)
    assert isinstance(s.services["db"].replicas, int)


def test_scenario_from_type() -> None:
    sc = Scenario.from_type(FailureType.MISROUTED_TRAFFIC, seed=5)
    assert sc == Scenario(
        FailureType.MISROUTED_TRAFFIC, DifficultyTier.EASY, 5, 20, False, "load_balancer"
    )
    assert hash(sc) == hash(Scenario.from_type(FailureType.MISROUTED_TRAFFIC, seed=5))
    assert Scenario.from_type(FailureType.AUTOSCALER_COST_CUT, seed=0).rogue_fleet_agent == (
        "autoscaler"
    )
    assert Scenario.from_type(FailureType.ROGUE_DEPLOY_BOT, seed=0).rogue_fleet_agent == (
        "deploy_bot"
    )
    assert Scenario.from_type(FailureType.DB_DEADLOCK, seed=0).rogue_fleet_agent is None
    hard = Scenario.from_type(FailureType.CASCADE, seed=1, difficulty=DifficultyTier.HARD)
    assert hard.inject_misleading_logs
    medium = Scenario.from_type(
        FailureType.CASCADE, seed=1, difficulty=DifficultyTier.MEDIUM, max_steps=7
    )
    assert not medium.inject_misleading_logs and medium.max_steps == 7
    with pytest.raises(AttributeError):
        sc.seed = 3  # type: ignore[misc]


def test_red_herrings_follow_the_episode_rng() -> None:
    herrings = [
        ("auth", "INFO", "routine token rotation completed"),
        ("notifications", "WARN", "email provider retry-after=2s"),
        ("db", "INFO", "vacuum completed, reclaimed 18MB"),
        ("payments", "WARN", "p95 brush with 250ms budget (non-breach)"),
    ]
    for seed in range(6):
        world = make_world(FailureType.DB_DEADLOCK, tier="hard", seed=seed)
        rng = random.Random(seed)
        expected = [rng.choice(herrings) for _ in range(3)]
        s = world.state
        assert s.misleading_log_count == 3
        tail = s.all_logs[-3:]
        assert [(x.service.value, x.level, x.message) for x in tail] == expected
        assert all(x.is_red_herring and x.timestamp == 0.0 for x in tail)
        assert not any(x.is_red_herring for x in s.all_logs[:-3])


def test_reset_gives_fresh_state_and_new_episode_id() -> None:
    world = make_world(FailureType.MEMORY_LEAK)
    first = world.state.episode_id
    world.apply_action(act("dev", "restart", "db"))
    world.reset(Scenario.from_type(FailureType.MEMORY_LEAK, seed=0))
    assert world.state.episode_id != first
    assert world.state.step_count == 0 and world.state.wrong_fixes == 0
    assert len(world.state.all_logs) == 1


def test_world_is_built_empty() -> None:
    world = WorldSim()
    assert world.state.services == {} and world.state.step_count == 0


# failure -> (resolving action, extra flags to set first)
RESOLVING = {
    FailureType.DB_DEADLOCK: act("dev", "restart", "db"),
    FailureType.MEMORY_LEAK: act("sre", "restart", "notifications"),
    FailureType.BAD_CONFIG_PUSH: act("dev", "rollback", "auth"),
    FailureType.AUTOSCALER_COST_CUT: act("dev", "scale", "payments", replicas=3),
    FailureType.MISROUTED_TRAFFIC: act("sre", "escalate"),
    FailureType.CASCADE: act("sre", "restart", "db"),
    FailureType.DNS_OUTAGE: act("sre", "restart", "auth"),
    FailureType.DISK_FULL: act("dev", "scale", "db", replicas=2),
    FailureType.ROGUE_DEPLOY_BOT: act("dev", "rollback", "payments"),
}


@pytest.mark.parametrize("failure", list(FailureType), ids=lambda f: f.value)
def test_resolving_action(failure: FailureType) -> None:
    world = make_world(failure)
    if failure is FailureType.MISROUTED_TRAFFIC:
        world.apply_action(act("oversight", "flag_rogue", "load_balancer"))
    if failure is FailureType.ROGUE_DEPLOY_BOT:
        world.apply_action(act("oversight", "flag_rogue", "deploy_bot"))
    flags = world.apply_action(RESOLVING[failure])
    assert flags["resolved"] and not flags["wrong_fix"]
    assert world.state.resolved and world.is_terminal()


def test_misrouted_traffic_escalate_needs_the_flag() -> None:
    world = make_world(FailureType.MISROUTED_TRAFFIC)
    assert not world.apply_action(act("manager", "escalate"))["resolved"]
    world.apply_action(act("oversight", "flag_rogue", "autoscaler"))
    assert not world.apply_action(act("manager", "escalate"))["resolved"]
    world.apply_action(act("oversight", "flag_rogue", "load_balancer"))
    assert world.apply_action(act("dev", "escalate"))["resolved"]


def test_disk_full_restart_db_also_resolves() -> None:
    world = make_world(FailureType.DISK_FULL)
    flags = world.apply_action(act("sre", "restart", "db"))
    assert flags["resolved"] and metrics_tuple(world, "db")[5] == "healthy"


def test_disk_full_scale_one_replica_is_wrong() -> None:
    world = make_world(FailureType.DISK_FULL)
    flags = world.apply_action(act("sre", "scale", "db", replicas=1))
    assert flags["wrong_fix"] and not flags["resolved"]
    assert world.state.services["db"].replicas == 1


def test_autoscaler_scale_to_two_is_wrong_but_sets_replicas() -> None:
    world = make_world(FailureType.AUTOSCALER_COST_CUT)
    flags = world.apply_action(act("dev", "scale", "payments", replicas=2))
    assert flags["wrong_fix"] and not flags["resolved"]
    assert metrics_tuple(world, "payments") == (94.0, 340.0, 780.0, 0.22, 2, "critical")
    flags = world.apply_action(act("dev", "scale", "payments", replicas="5"))
    assert flags["resolved"]
    assert metrics_tuple(world, "payments") == (30.0, 340.0, 55.0, 0.01, 5, "healthy")


def test_rogue_deploy_bot_rollback_before_flag_helps_then_flag_resolves() -> None:
    world = make_world(FailureType.ROGUE_DEPLOY_BOT)
    flags = world.apply_action(act("dev", "rollback", "payments"))
    assert not flags["resolved"] and not flags["wrong_fix"]
    assert metrics_tuple(world, "payments") == (22.0, 340.0, 45.0, 0.01, 4, "healthy")
    flags = world.apply_action(act("oversight", "flag_rogue", "deploy_bot"))
    assert flags["resolved"] and flags["rogue_flagged_correctly"]


def test_rogue_deploy_bot_flag_from_any_role_resolves_when_healthy() -> None:
    world = make_world(FailureType.ROGUE_DEPLOY_BOT)
    world.apply_action(act("oversight", "flag_rogue", "deploy_bot"))
    assert not world.state.resolved  # payments still critical
    world.apply_action(act("dev", "rollback", "payments"))
    assert world.state.resolved


def test_rogue_deploy_bot_flag_from_non_oversight_closes_after_rollback() -> None:
    world = make_world(FailureType.ROGUE_DEPLOY_BOT)
    world.apply_action(act("dev", "rollback", "payments"))
    world.apply_action(act("oversight", "flag_rogue", "autoscaler"))
    assert not world.state.resolved
    # deploy_bot not yet flagged: a non-oversight flag_rogue does not resolve
    assert not world.apply_action(act("sre", "flag_rogue", "deploy_bot"))["resolved"]
    world.state.oversight_flags.append("deploy_bot")
    flags = world.apply_action(act("sre", "flag_rogue", "deploy_bot"))
    assert flags["resolved"] and flags["miscommunication"]


def test_cascade_resolve_needs_db_and_notifications_healthy() -> None:
    world = make_world(FailureType.CASCADE)
    flags = world.apply_action(act("manager", "resolve"))
    assert not flags["resolved"]  # db still critical
    flags = world.apply_action(act("dev", "restart", "auth"))  # wrong fix -> cascade
    assert flags["cascade_triggered"]
    flags = world.apply_action(act("dev", "restart", "db"))
    assert not flags["resolved"] and not flags["wrong_fix"]  # notifications degraded
    assert metrics_tuple(world, "db")[5] == "healthy"
    flags = world.apply_action(act("dev", "restart", "notifications"))
    assert not flags["resolved"] and not flags["wrong_fix"]
    flags = world.apply_action(act("sre", "resolve"))  # any role closes it
    assert flags["resolved"] and flags["miscommunication"]


def test_resolution_judged_after_effect() -> None:
    world = make_world(FailureType.CASCADE)
    flags = world.apply_action(act("sre", "restart", "db"))
    assert flags["resolved"]
    assert metrics_tuple(world, "payments")[2:4] == (55.0, 0.01)


def test_health_values_are_enums() -> None:
    world = make_world(FailureType.DB_DEADLOCK)
    assert world.state.services["db"].health is ServiceHealth.CRITICAL
    assert AgentRole("sre") is AgentRole.SRE and ActionType("noop") is ActionType.NOOP


def test_every_failure_type_has_one_entry_and_names_its_rogue_agent_once() -> None:
    assert set(FAILURES) == set(FailureType)
    rogue = {"autoscaler_cost_cut", "misrouted_traffic", "rogue_deploy_bot"}  # docs/world.md
    for failure in FAILURES:
        assert failure.is_rogue_agent is (failure.value in rogue), failure
        scenario = Scenario.from_type(failure, seed=0)
        assert scenario.rogue_fleet_agent == failure.rogue_agent
        assert (failure.rogue_agent is None) is (failure not in ROGUE_AGENT_BY_FAILURE)
