"""The failure types of docs/world.md ("Failures"), one entry each in
:data:`FAILURES`: how the incident starts (an :class:`Injection`, which
``WorldSim.reset`` applies), the fixes that close it and the moves that help
it, how it grows with time and what a wrong fix sets off, the tiers whose
pools hold it, the oracle's plan, the words of its logs and alerts that give
it away (the mock LLM reads them) and the hint the role prompts give. The
fleet agent behind it is named by its ``FailureType`` member. Everything
outside ``chaosops/env`` reads these: adding a failure type is adding its
member to ``FailureType``, its entry here, and recording its data
(docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from chaosops.env.models import (
    ActionType,
    AgentRole,
    ChaosOpsState,
    DifficultyTier,
    FailureType,
    ServiceHealth,
    ServiceName,
)

__all__ = [
    "DEFAULT_FAILURE",
    "FAILURES",
    "MEMORY_CAP",
    "ROGUE_AGENT_BY_FAILURE",
    "FailureRules",
    "Fix",
    "Injection",
    "Move",
    "tier_pool",
]

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
class Move:
    """One move of the oracle's plan: ``kind`` by ``role``, on ``target``, with ``args``."""

    role: AgentRole
    kind: ActionType
    target: str | None = None
    args: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


WrongFixLog = tuple[ServiceName, str, str]
"""The log line (service, level, message) a wrong fix's consequence leaves."""


@dataclass(frozen=True, slots=True)
class FailureRules:
    """One failure type's rules and what the code around the world reads of it.

    The world: the ``injection`` reset applies, the ``fixes``, a move that
    ``also_helps`` without being a fix, what passes with time (``tick``), what
    a wrong fix sets off (``after_wrong_fix``: a log line when it did); the
    fleet agent behind it is its ``FailureType`` member's. Around it: the ``tiers`` whose pools
    hold it, the oracle's ``plan`` (the SRE's correct identification comes
    first), the lower-case ``signs`` in its logs and alerts that give it away,
    and the prompts' ``hint`` (what shows it; its fix).
    """

    injection: Injection
    fixes: tuple[Fix, ...]
    tiers: tuple[DifficultyTier, ...]
    plan: tuple[Move, ...]
    signs: tuple[str, ...]
    hint: str
    also_helps: Callable[[ChaosOpsState, ActionType, str], bool] | None = None
    tick: Callable[[ChaosOpsState], None] | None = None
    after_wrong_fix: Callable[[ChaosOpsState], WrongFixLog | None] | None = None

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


_OVERSIGHT, _DEV, _MANAGER = AgentRole.OVERSIGHT, AgentRole.DEV, AgentRole.MANAGER
_EASY, _MEDIUM, _HARD = DifficultyTier.EASY, DifficultyTier.MEDIUM, DifficultyTier.HARD
_RESTART, _ROLLBACK, _SCALE = ActionType.RESTART, ActionType.ROLLBACK, ActionType.SCALE
_FLAG, _ESCALATE, _RESOLVE = ActionType.FLAG_ROGUE, ActionType.ESCALATE, ActionType.RESOLVE


def _notifications_sicken(state: ChaosOpsState) -> WrongFixLog | None:
    """A wrong fix during a cascade: a healthy notifications starts leaking."""
    notifications = state.services["notifications"]
    if notifications.health is not ServiceHealth.HEALTHY:
        return None
    notifications.memory_mb = 900.0
    notifications.health = ServiceHealth.DEGRADED
    message = "secondary failure: heap growing after failed remediation"
    return ServiceName.NOTIFICATIONS, "WARN", message


# In the order of the tiers' pools (a tier's seeds follow a failure's place in its pool).
FAILURES: Mapping[FailureType, FailureRules] = MappingProxyType({
    FailureType.DB_DEADLOCK: FailureRules(
        _DB_DEADLOCK, (Fix(_RESTART, "db"),), tiers=(_EASY,),
        plan=(Move(_DEV, _RESTART, "db"),), signs=("deadlock detected",),
        hint="a deadlock in the db logs, payments and auth timing out on it: restart db",
    ),
    FailureType.MEMORY_LEAK: FailureRules(
        _MEMORY_LEAK, (Fix(_RESTART, "notifications"),), tiers=(_EASY,),
        plan=(Move(_DEV, _RESTART, "notifications"),), signs=("heap", "memory pressure"),
        hint="the notifications heap growing, gc pauses: restart notifications",
        tick=_leak_grows,
    ),
    FailureType.BAD_CONFIG_PUSH: FailureRules(
        _BAD_CONFIG_PUSH, (Fix(_ROLLBACK, "auth"),), tiers=(_EASY,),
        plan=(Move(_DEV, _ROLLBACK, "auth"),), signs=("rolled out",),
        hint="a config just rolled out (by a person) and requests rejected: roll that "
        "service back",
    ),
    FailureType.DNS_OUTAGE: FailureRules(
        _DNS_OUTAGE, (Fix(_RESTART, "auth"),), tiers=(_EASY,),
        plan=(Move(_DEV, _RESTART, "auth"),), signs=("nxdomain", "dns resolution"),
        hint="DNS resolution failing in auth (NXDOMAIN, SERVFAIL): restart auth",
    ),
    FailureType.MISROUTED_TRAFFIC: FailureRules(
        _MISROUTED_TRAFFIC, (Fix(_ESCALATE, when=_flagged("load_balancer")),), tiers=(_HARD,),
        plan=(Move(_OVERSIGHT, _FLAG, "load_balancer"), Move(_MANAGER, _ESCALATE)),
        signs=("shadow cluster", "backends healthy"),
        hint="requests routed to a shadow cluster while the backends are healthy: "
        "oversight flags the load_balancer, then escalate to the network team",
    ),
    FailureType.CASCADE: FailureRules(
        _CASCADE,
        (
            Fix(_RESTART, "db", when=_healthy("db", "notifications")),
            Fix(_RESOLVE, when=_healthy("db", "notifications")),
        ),
        tiers=(_MEDIUM, _HARD),
        plan=(Move(_DEV, _RESTART, "db"), Move(_MANAGER, _RESOLVE)),
        signs=("deadlock detected", "connection pool near saturation"),
        hint="a db deadlock filling the connection pool: restart db; a wrong fix sickens "
        "notifications, which then needs a restart too; the manager resolves once both "
        "are healthy",
        also_helps=_notifications_unhealthy, tick=_cascade_grows,
        after_wrong_fix=_notifications_sicken,
    ),
    FailureType.AUTOSCALER_COST_CUT: FailureRules(
        _AUTOSCALER_COST_CUT, (Fix(_SCALE, "payments", min_replicas=3),),
        tiers=(_MEDIUM, _HARD),
        plan=(
            Move(_OVERSIGHT, _FLAG, "autoscaler"),
            Move(_DEV, _SCALE, "payments", MappingProxyType({"replicas": 4})),
        ),
        signs=("by autoscaler",),
        hint="a service that lost replicas (fewer than 3, cpu above 80%) to the autoscaler: "
        "scale it back to 3 or more; oversight flags the autoscaler",
    ),
    FailureType.DISK_FULL: FailureRules(
        _DISK_FULL, (Fix(_RESTART, "db"), Fix(_SCALE, "db", min_replicas=2)), tiers=(_MEDIUM,),
        plan=(Move(_DEV, _SCALE, "db", MappingProxyType({"replicas": 2})),),
        signs=("no space left", "disk usage"),
        hint="db out of disk (no space left on device): scale db to 2", tick=_disk_fills,
    ),
    FailureType.ROGUE_DEPLOY_BOT: FailureRules(
        _ROGUE_DEPLOY_BOT,
        (
            Fix(_ROLLBACK, "payments", when=_flagged("deploy_bot")),
            Fix(_FLAG, when=_both(_flagged("deploy_bot"), _healthy("payments"))),
        ),
        tiers=(_HARD,),
        plan=(Move(_OVERSIGHT, _FLAG, "deploy_bot"), Move(_DEV, _ROLLBACK, "payments")),
        signs=("pushed by deploy_bot",),
        hint="a config pushed by deploy_bot and payments rejecting: oversight flags "
        "deploy_bot, then roll payments back",
    ),
})  # fmt: skip
"""The rules of each failure type (docs/world.md, "Failures")."""

DEFAULT_FAILURE = next(iter(FAILURES))
"""What a reset plays when it names no failure type."""

ROGUE_AGENT_BY_FAILURE: Mapping[FailureType, str] = MappingProxyType(
    {failure: failure.rogue_agent for failure in FAILURES if failure.rogue_agent is not None}
)
"""The fleet agent behind each rogue failure (``Scenario.from_type`` names it)."""


def tier_pool(tier: DifficultyTier | str) -> tuple[FailureType, ...]:
    """The failure types of a tier's pool, in the table's order."""
    chosen = DifficultyTier(tier)
    return tuple(failure for failure, rules in FAILURES.items() if chosen in rules.tiers)
