"""The failure types of docs/world.md ("Failures"), one entry each in
:data:`FAILURES`: how the incident starts (an :class:`Injection`, which
``WorldSim.reset`` applies), the fixes that close it and the moves that help it, how it
grows with time, and the fleet agent behind it. Adding a failure type is adding
its entry here, and its name to ``FailureType``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from chaosops.env.models import (
    ActionType,
    ChaosOpsState,
    FailureType,
    ServiceHealth,
    ServiceName,
)

__all__ = ["FAILURES", "MEMORY_CAP", "ROGUE_AGENT_BY_FAILURE", "FailureRules", "Fix", "Injection"]

MEMORY_CAP = 4096.0
"""The most memory (MB) a growing failure takes a service to."""


@dataclass(frozen=True, slots=True)
class Injection:
    """How a failure starts, as data: each service's metrics set (its health
    among them; the rest keep their healthy values), then the fleet actions,
    log lines and alerts it leaves, each list in order."""

    services: Mapping[str, Mapping[str, Any]]
    logs: tuple[tuple[ServiceName, str, str], ...] = ()  # (service, level, message)
    alerts: tuple[tuple[ServiceName, str, str], ...] = ()  # (service, severity, message)
    fleet: tuple[tuple[str, str, str], ...] = ()  # (agent, action, target)


@dataclass(frozen=True, slots=True)
class Fix:
    """A move that remedies a failure: ``kind``, on ``target`` when it names one,
    with at least ``min_replicas`` for a scale. It helps whenever it is made;
    it closes the incident when ``when`` holds of the state after it."""

    kind: ActionType
    target: str | None = None
    min_replicas: int = 0
    when: Callable[[ChaosOpsState], bool] | None = None

    def matches(self, kind: ActionType, target: str | None, replicas: int | None) -> bool:
        return (
            kind is self.kind
            and (self.target is None or target == self.target)
            and (not self.min_replicas or (replicas is not None and replicas >= self.min_replicas))
        )


@dataclass(frozen=True, slots=True)
class FailureRules:
    """One failure type's rules: the ``injection`` reset applies, the ``fixes``, a move
    that ``also_helps`` without being a fix, what passes with time, and the
    ``rogue`` fleet agent that caused it."""

    injection: Injection
    fixes: tuple[Fix, ...]
    also_helps: Callable[[ChaosOpsState, ActionType, str], bool] | None = None
    tick: Callable[[ChaosOpsState], None] | None = None
    rogue: str | None = None  # the fleet agent behind it, if one is

    def closes(
        self, state: ChaosOpsState, kind: ActionType, target: str | None, replicas: int | None
    ) -> bool:
        for fix in self.fixes:
            if fix.matches(kind, target, replicas) and (fix.when is None or fix.when(state)):
                return True
        return False

    def helps(
        self, state: ChaosOpsState, kind: ActionType, target: str, replicas: int | None
    ) -> bool:
        for fix in self.fixes:
            if fix.matches(kind, target, replicas):
                return True
        return self.also_helps is not None and self.also_helps(state, kind, target)


_DB_DEADLOCK = Injection(
    services={
        "db": {"latency_ms": 1800.0, "error_rate": 0.45, "health": ServiceHealth.CRITICAL},
        "payments": {"latency_ms": 950.0, "error_rate": 0.32, "health": ServiceHealth.DEGRADED},
        "auth": {"latency_ms": 950.0, "error_rate": 0.32, "health": ServiceHealth.DEGRADED},
    },
    logs=(
        (ServiceName.DB, "ERROR", "deadlock detected on txn_id=0x8f4a"),
        (ServiceName.PAYMENTS, "ERROR", "upstream DB timeout after 2000ms"),
    ),
    alerts=((ServiceName.PAYMENTS, "page", "payment error rate > 30%"),),
)
_MEMORY_LEAK = Injection(
    services={
        "notifications": {"memory_mb": 1200.0, "cpu_pct": 71.0, "health": ServiceHealth.DEGRADED}
    },
    logs=((ServiceName.NOTIFICATIONS, "WARN", "heap 1200MB, gc pause 880ms"),),
    alerts=((ServiceName.NOTIFICATIONS, "warn", "memory pressure on notifications"),),
)
_BAD_CONFIG_PUSH = Injection(
    services={"auth": {"error_rate": 0.68, "latency_ms": 210.0, "health": ServiceHealth.CRITICAL}},
    logs=(
        (
            ServiceName.AUTH,
            "ERROR",
            "config v17.2 rolled out 48s ago; 68% of requests rejected: unknown key 'jwt_iss'",
        ),
    ),
    alerts=((ServiceName.AUTH, "page", "auth error rate spike after deploy"),),
)
_AUTOSCALER_COST_CUT = Injection(
    services={
        "payments": {
            "replicas": 1,
            "cpu_pct": 94.0,
            "latency_ms": 780.0,
            "error_rate": 0.22,
            "health": ServiceHealth.CRITICAL,
        }
    },
    fleet=(("autoscaler", "scale_down", "payments"),),
    logs=(
        (ServiceName.PAYMENTS, "WARN", "pool shrank 4 -> 1 by autoscaler (cost budget exceeded)"),
    ),
    alerts=((ServiceName.PAYMENTS, "page", "payments CPU 94%, latency > 700ms"),),
)
_MISROUTED_TRAFFIC = Injection(
    services={"payments": {"error_rate": 0.41, "health": ServiceHealth.CRITICAL}},
    fleet=(("load_balancer", "route_override", "payments"),),
    logs=(
        (ServiceName.PAYMENTS, "ERROR", "41% of requests routed to shadow cluster (hash=0xdead)"),
    ),
    alerts=((ServiceName.PAYMENTS, "page", "payments error rate 41% — backends healthy"),),
)
_CASCADE = replace(  # a deadlock whose pool is filling up
    _DB_DEADLOCK,
    logs=(
        *_DB_DEADLOCK.logs,
        (ServiceName.DB, "WARN", "connection pool near saturation — downstream services queueing"),
    ),
)
_DNS_OUTAGE = Injection(
    services={
        "auth": {"latency_ms": 1450.0, "error_rate": 0.28, "health": ServiceHealth.DEGRADED},
        "payments": {"latency_ms": 1100.0, "error_rate": 0.19, "health": ServiceHealth.DEGRADED},
    },
    logs=(
        (
            ServiceName.AUTH,
            "ERROR",
            "upstream lookup NXDOMAIN for auth-idp.internal (resolver TTL expired)",
        ),
        (
            ServiceName.PAYMENTS,
            "WARN",
            "fallback DNS resolver returning SERVFAIL; retry storm observed",
        ),
    ),
    alerts=((ServiceName.AUTH, "page", "auth latency > 1.4s — DNS resolution failing"),),
)
_DISK_FULL = Injection(
    services={
        "db": {
            "memory_mb": 3650.0,
            "cpu_pct": 58.0,
            "error_rate": 0.14,
            "latency_ms": 640.0,
            "health": ServiceHealth.DEGRADED,
        }
    },
    logs=(
        (ServiceName.DB, "WARN", "disk usage 97% on /var/lib/db (WAL archiving stalled)"),
        (ServiceName.DB, "ERROR", "INSERT failed: could not extend file: No space left on device"),
    ),
    alerts=((ServiceName.DB, "page", "database disk volume near capacity"),),
)
_ROGUE_DEPLOY_BOT = Injection(
    services={
        "payments": {"error_rate": 0.71, "latency_ms": 310.0, "health": ServiceHealth.CRITICAL}
    },
    fleet=(("deploy_bot", "push_config", "payments"),),
    logs=(
        (
            ServiceName.PAYMENTS,
            "ERROR",
            "config v22.1 pushed by deploy_bot 30s ago; 71% of txns rejected: checksum mismatch",
        ),
    ),
    alerts=(
        (ServiceName.PAYMENTS, "page", "payments error rate 71% immediately after deploy_bot push"),
    ),
)


def _flagged(agent: str) -> Callable[[ChaosOpsState], bool]:
    return lambda state: agent in state.oversight_flags


def _healthy(*services: str) -> Callable[[ChaosOpsState], bool]:
    return lambda state: all(
        state.services[name].health is ServiceHealth.HEALTHY for name in services
    )


def _both(*conditions: Callable[[ChaosOpsState], bool]) -> Callable[[ChaosOpsState], bool]:
    return lambda state: all(condition(state) for condition in conditions)


def _notifications_unhealthy(state: ChaosOpsState, kind: ActionType, target: str) -> bool:
    notifications = state.services["notifications"]
    return (
        kind is ActionType.RESTART
        and target == "notifications"
        and notifications.health is not ServiceHealth.HEALTHY
    )


def _leak_grows(state: ChaosOpsState) -> None:
    m = state.services["notifications"]
    m.memory_mb = min(m.memory_mb + 180.0, MEMORY_CAP)
    if m.memory_mb > 2000:
        m.health = ServiceHealth.CRITICAL


def _cascade_grows(state: ChaosOpsState) -> None:
    m = state.services["notifications"]
    if m.health is not ServiceHealth.HEALTHY:
        m.memory_mb = min(m.memory_mb + 120.0, MEMORY_CAP)


def _disk_fills(state: ChaosOpsState) -> None:
    m = state.services["db"]
    m.memory_mb = min(m.memory_mb + 45.0, MEMORY_CAP)
    m.error_rate = min(m.error_rate + 0.02, 0.95)
    if m.memory_mb > 3900:
        m.health = ServiceHealth.CRITICAL


FAILURES: Mapping[FailureType, FailureRules] = MappingProxyType(
    {
        FailureType.DB_DEADLOCK: FailureRules(_DB_DEADLOCK, (Fix(ActionType.RESTART, "db"),)),
        FailureType.MEMORY_LEAK: FailureRules(
            _MEMORY_LEAK, (Fix(ActionType.RESTART, "notifications"),), tick=_leak_grows
        ),
        FailureType.BAD_CONFIG_PUSH: FailureRules(
            _BAD_CONFIG_PUSH, (Fix(ActionType.ROLLBACK, "auth"),)
        ),
        FailureType.AUTOSCALER_COST_CUT: FailureRules(
            _AUTOSCALER_COST_CUT,
            (Fix(ActionType.SCALE, "payments", min_replicas=3),),
            rogue="autoscaler",
        ),
        FailureType.MISROUTED_TRAFFIC: FailureRules(
            _MISROUTED_TRAFFIC,
            (Fix(ActionType.ESCALATE, when=_flagged("load_balancer")),),
            rogue="load_balancer",
        ),
        FailureType.CASCADE: FailureRules(
            _CASCADE,
            (
                Fix(ActionType.RESTART, "db", when=_healthy("db", "notifications")),
                Fix(ActionType.RESOLVE, when=_healthy("db", "notifications")),
            ),
            also_helps=_notifications_unhealthy,
            tick=_cascade_grows,
        ),
        FailureType.DNS_OUTAGE: FailureRules(_DNS_OUTAGE, (Fix(ActionType.RESTART, "auth"),)),
        FailureType.DISK_FULL: FailureRules(
            _DISK_FULL,
            (Fix(ActionType.RESTART, "db"), Fix(ActionType.SCALE, "db", min_replicas=2)),
            tick=_disk_fills,
        ),
        FailureType.ROGUE_DEPLOY_BOT: FailureRules(
            _ROGUE_DEPLOY_BOT,
            (
                Fix(ActionType.ROLLBACK, "payments", when=_flagged("deploy_bot")),
                Fix(
                    ActionType.FLAG_ROGUE, when=_both(_flagged("deploy_bot"), _healthy("payments"))
                ),
            ),
            rogue="deploy_bot",
        ),
    }
)
"""The rules of each failure type (docs/world.md, "Failures"): adding a failure
type is adding its entry here (and its name to ``FailureType``)."""

ROGUE_AGENT_BY_FAILURE: Mapping[FailureType, str] = MappingProxyType(
    {failure: rules.rogue for failure, rules in FAILURES.items() if rules.rogue is not None}
)
"""The fleet agent behind each rogue failure (``Scenario.from_type`` names it)."""
