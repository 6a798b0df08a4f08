"""Applying each action type, its edges, and time passing (docs/world.md, "One step")."""

from __future__ import annotations

import pytest

from chaosops.env.models import FailureType
from chaosops.env.world_sim import FLAG_NAMES

from .helpers import act, make_world, metrics_tuple

ALL_FALSE = dict.fromkeys(FLAG_NAMES, False)


def only(**true: bool) -> dict[str, bool]:
    return {**ALL_FALSE, **true}


def test_flags_shape_and_step_count() -> None:
    world = make_world(FailureType.DB_DEADLOCK)
    flags = world.apply_action(act("sre", "noop"))
    assert flags == ALL_FALSE
    assert world.state.step_count == 1
    world.apply_action(act("sre", "escalate"))
    assert world.state.step_count == 2


def test_acting_after_resolution_changes_nothing() -> None:
    world = make_world(FailureType.DB_DEADLOCK)
    world.apply_action(act("dev", "restart", "db"))
    before = world.state.model_dump()
    for action in (
        act("dev", "restart", "auth"),
        act("sre", "communicate", message=""),
        act("dev", "resolve"),
    ):
        assert world.apply_action(action) == ALL_FALSE
        world.tick()
    assert world.state.model_dump() == before


# ---- communicate ---------------------------------------------------------------
def test_communicate_public() -> None:
    world = make_world(FailureType.DB_DEADLOCK)
    assert world.apply_action(act("sre", "communicate", message="  db is down  ")) == ALL_FALSE
    world.apply_action(act("dev", "communicate", message="on it", to="all"))
    world.apply_action(act("dev", "communicate", message="ALL caps", to=" ALL "))
    world.apply_action(act("dev", "communicate", message="blank to", to="   "))
    assert world.state.chat_history == [
        "[sre] db is down",
        "[dev] on it",
        "[dev] ALL caps",
        "[dev] blank to",
    ]
    assert world.state.private_chat == {}


@pytest.mark.parametrize("message", ["", "   ", None])
def test_communicate_empty_message(message: str | None) -> None:
    world = make_world(FailureType.DB_DEADLOCK)
    flags = world.apply_action(act("sre", "communicate", message=message, to="nobody"))
    assert flags == only(miscommunication=True)
    assert world.state.miscommunications == 0  # the environment raises it, not the world
    assert world.state.chat_history == [] and world.state.private_chat == {}


def test_communicate_private_and_unknown_recipient() -> None:
    world = make_world(FailureType.DB_DEADLOCK)
    assert world.apply_action(act("sre", "communicate", message="psst", to=" Dev ")) == ALL_FALSE
    assert world.state.private_chat == {"dev": ["[sre -> dev] psst"]}
    assert world.state.chat_history == []
    flags = world.apply_action(act("sre", "communicate", message="hello?", to="nobody"))
    assert flags == ALL_FALSE  # counter moves, no flag
    assert world.state.miscommunications == 1
    assert world.state.chat_history == []
    assert world.state.private_chat == {"dev": ["[sre -> dev] psst"]}


def test_communicate_converts_args_with_str() -> None:
    world = make_world(FailureType.DB_DEADLOCK)
    world.apply_action(act("sre", "communicate", message=42))
    assert world.state.chat_history == ["[sre] 42"]


# ---- restart / rollback --------------------------------------------------------
@pytest.mark.parametrize("kind", ["restart", "rollback"])
@pytest.mark.parametrize("target", [None, "ghost", "autoscaler", "DB", " db"])
def test_bad_target_is_wrong_fix_without_cascade(kind: str, target: str | None) -> None:
    world = make_world(FailureType.CASCADE)
    before = {n: metrics_tuple(world, n) for n in world.state.services}
    flags = world.apply_action(act("dev", kind, target))
    assert flags == only(wrong_fix=True)
    assert world.state.wrong_fixes == 1
    assert {n: metrics_tuple(world, n) for n in world.state.services} == before


def test_beneficial_restart_db_heals_dependents() -> None:
    world = make_world(FailureType.DB_DEADLOCK)
    world.apply_action(act("dev", "restart", "db"))
    assert metrics_tuple(world, "db") == (22.0, 340.0, 45.0, 0.01, 1, "healthy")
    assert metrics_tuple(world, "payments") == (22.0, 340.0, 55.0, 0.01, 4, "healthy")
    assert metrics_tuple(world, "auth") == (22.0, 340.0, 55.0, 0.01, 3, "healthy")


def test_beneficial_restart_resets_memory_and_cpu() -> None:
    world = make_world(FailureType.MEMORY_LEAK)
    world.apply_action(act("dev", "restart", "notifications"))
    assert metrics_tuple(world, "notifications") == (22.0, 340.0, 45.0, 0.01, 2, "healthy")


def test_beneficial_rollback_sets_err_latency_health_only() -> None:
    world = make_world(FailureType.ROGUE_DEPLOY_BOT)
    world.state.services["payments"].cpu_pct = 77.0
    world.apply_action(act("dev", "rollback", "payments"))
    assert metrics_tuple(world, "payments") == (77.0, 340.0, 45.0, 0.01, 4, "healthy")


@pytest.mark.parametrize(
    ("failure", "action"),
    [
        (FailureType.DB_DEADLOCK, act("dev", "restart", "auth")),
        (FailureType.DB_DEADLOCK, act("dev", "rollback", "db")),
        (FailureType.MEMORY_LEAK, act("dev", "rollback", "notifications")),
        (FailureType.BAD_CONFIG_PUSH, act("dev", "restart", "auth")),
        (FailureType.AUTOSCALER_COST_CUT, act("dev", "restart", "payments")),
        (FailureType.MISROUTED_TRAFFIC, act("dev", "restart", "payments")),
        (FailureType.MISROUTED_TRAFFIC, act("dev", "rollback", "payments")),
        (FailureType.DNS_OUTAGE, act("dev", "restart", "payments")),
        (FailureType.DISK_FULL, act("dev", "rollback", "db")),
        (FailureType.ROGUE_DEPLOY_BOT, act("dev", "restart", "payments")),
    ],
)
def test_wrong_fix_changes_no_metrics(failure: FailureType, action) -> None:
    world = make_world(failure)
    before = {n: metrics_tuple(world, n) for n in world.state.services}
    flags = world.apply_action(action)
    assert flags == only(wrong_fix=True)
    assert world.state.wrong_fixes == 1
    assert {n: metrics_tuple(world, n) for n in world.state.services} == before


def test_cascade_trigger_once_while_notifications_healthy() -> None:
    world = make_world(FailureType.CASCADE)
    n_logs = len(world.state.all_logs)
    flags = world.apply_action(act("dev", "rollback", "payments"))
    assert flags == only(wrong_fix=True, cascade_triggered=True)
    assert metrics_tuple(world, "notifications") == (22.0, 900.0, 45.0, 0.01, 2, "degraded")
    new = world.state.all_logs[n_logs:]
    assert [(x.service.value, x.level, x.message, x.timestamp) for x in new] == [
        ("notifications", "WARN", "secondary failure: heap growing after failed remediation", 1.0)
    ]
    flags = world.apply_action(act("dev", "restart", "auth"))
    assert flags == only(wrong_fix=True)  # notifications already unhealthy
    assert world.state.wrong_fixes == 2


def test_cascade_restart_notifications_beneficial_only_while_unhealthy() -> None:
    world = make_world(FailureType.CASCADE)
    flags = world.apply_action(act("dev", "restart", "notifications"))
    assert flags == only(wrong_fix=True, cascade_triggered=True)
    flags = world.apply_action(act("dev", "restart", "notifications"))
    assert flags == ALL_FALSE
    assert metrics_tuple(world, "notifications") == (22.0, 340.0, 45.0, 0.01, 2, "healthy")
    # a rollback is never beneficial here: a wrong fix, and the trigger again
    flags = world.apply_action(act("dev", "rollback", "db"))
    assert flags == only(wrong_fix=True, cascade_triggered=True)
    world.apply_action(act("dev", "restart", "notifications"))
    assert world.apply_action(act("dev", "restart", "db"))["resolved"]


def test_cascade_trigger_only_for_cascade() -> None:
    world = make_world(FailureType.DB_DEADLOCK)
    flags = world.apply_action(act("dev", "restart", "notifications"))
    assert flags == only(wrong_fix=True)
    assert metrics_tuple(world, "notifications")[5] == "healthy"


def test_bad_scale_never_triggers_cascade() -> None:
    world = make_world(FailureType.CASCADE)
    flags = world.apply_action(act("dev", "scale", "payments", replicas=3))
    assert flags == only(wrong_fix=True)
    assert world.state.services["payments"].replicas == 3


# ---- scale ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("target", "args"),
    [
        ("payments", {}),
        (None, {"replicas": 4}),
        ("ghost", {"replicas": 4}),
        ("load_balancer", {"replicas": 4}),
    ],
)
def test_scale_rejections(target: str | None, args: dict) -> None:
    world = make_world(FailureType.AUTOSCALER_COST_CUT)
    flags = world.apply_action(act("dev", "scale", target, **args))
    assert flags == only(wrong_fix=True)
    assert world.state.wrong_fixes == 1
    assert world.state.services["payments"].replicas == 1


@pytest.mark.parametrize(
    ("value", "resolves", "replicas"),
    [
        ("3", True, 3),
        (" 4 ", True, 4),
        (4.0, True, 4),
        (3.9, True, 3),
        (2.5, False, 2),  # int(2.5) == 2 < 3: set, but not beneficial
        (2.9, False, 2),
        (True, False, 1),  # Python's int(True) == 1
        (0.5, False, 1),  # int(0.5) == 0: refused, untouched
        ("2.5", False, 1),  # int refuses it: untouched
        ("three", False, 1),
        (float("nan"), False, 1),
        (float("inf"), False, 1),
        ([3], False, 1),
        (0, False, 1),
        (-1, False, 1),
    ],
)
def test_scale_uses_python_int(value: object, resolves: bool, replicas: int) -> None:
    world = make_world(FailureType.AUTOSCALER_COST_CUT)
    flags = world.apply_action(act("dev", "scale", "payments", replicas=value))
    assert flags["resolved"] is resolves and flags["wrong_fix"] is (not resolves)
    assert world.state.wrong_fixes == (0 if resolves else 1)
    assert world.state.services["payments"].replicas == replicas
    assert type(world.state.services["payments"].replicas) is int


# ---- flag_rogue ------------------------------------------------------------------------
def test_flag_rogue_from_non_oversight_is_miscommunication() -> None:
    world = make_world(FailureType.AUTOSCALER_COST_CUT)
    for role in ("sre", "dev", "manager"):
        flags = world.apply_action(act(role, "flag_rogue", "autoscaler"))
        assert flags == only(miscommunication=True)
    assert world.state.miscommunications == 3
    assert world.state.oversight_flags == []


def test_flag_rogue_correct_incorrect_and_repeat() -> None:
    world = make_world(FailureType.AUTOSCALER_COST_CUT)
    assert world.apply_action(act("oversight", "flag_rogue", "autoscaler")) == only(
        rogue_flagged_correctly=True
    )
    assert world.apply_action(act("oversight", "flag_rogue", "autoscaler")) == only(
        rogue_flagged_correctly=True
    )
    assert world.apply_action(act("oversight", "flag_rogue", "deploy_bot")) == only(
        rogue_flagged_incorrectly=True
    )
    assert world.state.oversight_flags == ["autoscaler", "autoscaler", "deploy_bot"]


@pytest.mark.parametrize("flagged", ["db", "autoscaler"])
def test_flag_rogue_without_rogue_is_incorrect(flagged: str) -> None:
    world = make_world(FailureType.DB_DEADLOCK)
    assert world.apply_action(act("oversight", "flag_rogue", flagged)) == only(
        rogue_flagged_incorrectly=True
    )


def test_flag_rogue_agent_name_and_exact_target() -> None:
    world = make_world(FailureType.MISROUTED_TRAFFIC)
    flags = world.apply_action(act("oversight", "flag_rogue", None, agent_name="  load_balancer "))
    assert flags == only(rogue_flagged_correctly=True)
    flags = world.apply_action(act("oversight", "flag_rogue", "", agent_name="load_balancer"))
    assert flags == only(rogue_flagged_correctly=True)
    # the target wins over agent_name and is used as given (no stripping)
    flags = world.apply_action(act("oversight", "flag_rogue", " load_balancer"))
    assert flags == only(rogue_flagged_incorrectly=True)
    assert world.state.oversight_flags == ["load_balancer", "load_balancer", " load_balancer"]


@pytest.mark.parametrize("agent_name", [None, "", "   "])
def test_flag_rogue_empty_name_does_nothing(agent_name: str | None) -> None:
    world = make_world(FailureType.MISROUTED_TRAFFIC)
    flags = world.apply_action(act("oversight", "flag_rogue", None, agent_name=agent_name))
    assert flags == ALL_FALSE
    assert world.state.oversight_flags == [] and world.state.step_count == 1


# ---- identify_root_cause ----------------------------------------------------------
@pytest.mark.parametrize("value", [None, "", "not_a_failure", "DB_DEADLOCK", "Db_deadlock"])
def test_invalid_root_cause(value: str | None) -> None:
    world = make_world(FailureType.DB_DEADLOCK)
    flags = world.apply_action(act("sre", "identify_root_cause", failure_type=value))
    assert flags == only(miscommunication=True)
    assert world.state.miscommunications == 0
    assert world.state.declared_root_cause is None
    assert world.state.declared_root_cause_step is None


def test_root_cause_first_declaration_step_kept() -> None:
    world = make_world(FailureType.DISK_FULL)
    world.apply_action(act("sre", "noop"))
    flags = world.apply_action(act("sre", "identify_root_cause", failure_type=" memory_leak "))
    assert flags == ALL_FALSE
    assert world.state.declared_root_cause is FailureType.MEMORY_LEAK
    assert world.state.declared_root_cause_step == 2
    flags = world.apply_action(act("sre", "identify_root_cause", failure_type="disk_full"))
    assert flags == only(root_cause_correct=True)
    assert world.state.declared_root_cause is FailureType.DISK_FULL
    assert world.state.declared_root_cause_step == 2


# ---- resolve ---------------------------------------------------------------------------
def test_resolve_from_non_manager() -> None:
    world = make_world(FailureType.DB_DEADLOCK)
    for role in ("sre", "dev", "oversight"):
        assert world.apply_action(act(role, "resolve")) == only(miscommunication=True)
    assert world.state.miscommunications == 3
    assert world.apply_action(act("manager", "resolve")) == ALL_FALSE
    assert not world.state.resolved  # closing is decided by section 5 only


# ---- tick -------------------------------------------------------------------------------
def test_tick_memory_leak() -> None:
    world = make_world(FailureType.MEMORY_LEAK)
    memories = []
    for _ in range(6):
        world.tick()
        memories.append(world.state.services["notifications"].memory_mb)
        health = world.state.services["notifications"].health.value
        assert health == ("critical" if memories[-1] > 2000 else "degraded")
    assert memories == [1380.0, 1560.0, 1740.0, 1920.0, 2100.0, 2280.0]
    for _ in range(20):
        world.tick()
    assert world.state.services["notifications"].memory_mb == 4096.0


def test_tick_cascade_only_while_notifications_unhealthy() -> None:
    world = make_world(FailureType.CASCADE)
    world.tick()
    assert metrics_tuple(world, "notifications")[1] == 340.0
    world.apply_action(act("dev", "restart", "auth"))  # triggers the cascade
    world.tick()
    world.tick()
    assert metrics_tuple(world, "notifications")[1] == 1140.0
    for _ in range(40):
        world.tick()
    assert metrics_tuple(world, "notifications")[1] == 4096.0
    assert metrics_tuple(world, "notifications")[5] == "degraded"


def test_tick_disk_full() -> None:
    world = make_world(FailureType.DISK_FULL)
    world.tick()
    db = world.state.services["db"]
    assert db.memory_mb == 3695.0 and db.error_rate == pytest.approx(0.16)
    assert db.health.value == "degraded"
    for _ in range(4):
        world.tick()
    assert db.memory_mb == 3875.0 and db.health.value == "degraded"
    world.tick()
    assert db.memory_mb == 3920.0 and db.health.value == "critical"
    for _ in range(60):
        world.tick()
    assert db.memory_mb == 4096.0 and db.error_rate == 0.95


@pytest.mark.parametrize(
    "failure",
    [
        f
        for f in FailureType
        if f not in (FailureType.MEMORY_LEAK, FailureType.CASCADE, FailureType.DISK_FULL)
    ],
)
def test_tick_other_failures_is_inert(failure: FailureType) -> None:
    world = make_world(failure)
    before = world.state.model_dump()
    world.tick()
    assert world.state.model_dump() == before


def test_no_tick_once_resolved() -> None:
    world = make_world(FailureType.DISK_FULL)
    world.apply_action(act("dev", "restart", "db"))
    before = metrics_tuple(world, "db")
    world.tick()
    assert metrics_tuple(world, "db") == before


def test_terminal_on_max_steps() -> None:
    world = make_world(FailureType.DB_DEADLOCK, max_steps=2)
    assert not world.is_terminal()
    world.apply_action(act("sre", "noop"))
    assert not world.is_terminal()
    world.apply_action(act("sre", "noop"))
    assert world.is_terminal() and not world.state.resolved


def test_logs_and_alerts_carry_the_step() -> None:
    world = make_world(FailureType.CASCADE)
    world.apply_action(act("sre", "noop"))
    world.apply_action(act("sre", "noop"))
    world.apply_action(act("dev", "restart", "auth"))
    assert world.state.all_logs[-1].timestamp == 3.0
