"""Enums and pydantic v2 models of the ChaosOps world (docs/world.md, "Names" and "The models").

Metric values are changed in place by the world's rules without re-validation
(pydantic's ``validate_assignment`` is off). Views are built by ordinary
validation, which keeps the models and enum members it is given; see
:mod:`chaosops.env.world_sim`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ServiceName(StrEnum):
    """Services (the first four, with metrics) and fleet agents (the last three)."""

    AUTH = "auth"
    PAYMENTS = "payments"
    NOTIFICATIONS = "notifications"
    DB = "db"
    AUTOSCALER = "autoscaler"
    LOAD_BALANCER = "load_balancer"
    DEPLOY_BOT = "deploy_bot"

    @property
    def is_service(self) -> bool:
        """True for the four services that have metrics."""
        return self in _SERVICES

    @property
    def is_fleet_agent(self) -> bool:
        """True for the in-fleet bots that can go rogue."""
        return not self.is_service


_SERVICES = frozenset(
    {ServiceName.AUTH, ServiceName.PAYMENTS, ServiceName.NOTIFICATIONS, ServiceName.DB}
)
SERVICE_NAMES: tuple[str, ...] = ("auth", "payments", "notifications", "db")
FLEET_AGENT_NAMES: tuple[str, ...] = ("autoscaler", "load_balancer", "deploy_bot")


class ServiceHealth(StrEnum):
    HEALTHY = "healthy"
    DEGRADED = "degraded"
    CRITICAL = "critical"
    DOWN = "down"


class FailureType(StrEnum):
    """The failure types; a member names the fleet agent behind it, if one is.
    The rest of a failure type's rules are its entry in ``chaosops.env.failures``."""

    rogue_agent: str | None

    def __new__(cls, value: str, rogue_agent: str | None = None) -> FailureType:
        member = str.__new__(cls, value)
        member._value_ = value
        member.rogue_agent = rogue_agent
        return member

    DB_DEADLOCK = "db_deadlock"
    MEMORY_LEAK = "memory_leak"
    BAD_CONFIG_PUSH = "bad_config_push"
    AUTOSCALER_COST_CUT = "autoscaler_cost_cut", "autoscaler"
    MISROUTED_TRAFFIC = "misrouted_traffic", "load_balancer"
    CASCADE = "cascade"
    DNS_OUTAGE = "dns_outage"
    DISK_FULL = "disk_full"
    ROGUE_DEPLOY_BOT = "rogue_deploy_bot", "deploy_bot"

    @property
    def is_rogue_agent(self) -> bool:
        """True when an in-fleet bot caused the incident."""
        return self.rogue_agent is not None


class AgentRole(StrEnum):
    SRE = "sre"
    DEV = "dev"
    MANAGER = "manager"
    OVERSIGHT = "oversight"


class ActionType(StrEnum):
    NOOP = "noop"
    COMMUNICATE = "communicate"
    RESTART = "restart"
    ROLLBACK = "rollback"
    SCALE = "scale"
    FLAG_ROGUE = "flag_rogue"
    IDENTIFY_ROOT_CAUSE = "identify_root_cause"
    ESCALATE = "escalate"
    RESOLVE = "resolve"


class DifficultyTier(StrEnum):
    EASY = "easy"
    MEDIUM = "medium"
    HARD = "hard"


class ServiceMetrics(BaseModel):
    """Live metrics of one service; mutated in place by the world."""

    cpu_pct: float = Field(ge=0, le=100)
    memory_mb: float = Field(ge=0)
    latency_ms: float = Field(ge=0)
    error_rate: float = Field(ge=0, le=1)
    replicas: int = Field(ge=0)
    health: ServiceHealth = ServiceHealth.HEALTHY


class LogLine(BaseModel):
    timestamp: float
    service: ServiceName
    level: str
    message: str
    is_red_herring: bool = False


class Alert(BaseModel):
    service: ServiceName
    severity: str
    message: str
    triggered_at_step: int


class FleetAgentLog(BaseModel):
    agent_name: str
    action: str
    target: str
    step: int
    was_malicious: bool = False


class ChaosOpsAction(BaseModel):
    """One action by one role. ``args`` keys whose value is None are dropped."""

    role: AgentRole
    action_type: ActionType
    target: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)

    @field_validator("args", mode="before")
    @classmethod
    def _drop_none_args(cls, value: Any) -> Any:
        if value is None:
            return {}
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if v is not None}
        return value


class RoleView(BaseModel):
    """What one role sees at its turn (docs/world.md, "What each role sees")."""

    role: AgentRole
    visible_metrics: dict[str, ServiceMetrics] = Field(default_factory=dict)
    visible_logs: list[LogLine] = Field(default_factory=list)
    visible_alerts: list[Alert] = Field(default_factory=list)
    visible_fleet_actions: list[FleetAgentLog] = Field(default_factory=list)
    shared_chat: list[str] = Field(default_factory=list)
    private_note: str | None = None
    private_inbox: list[str] = Field(default_factory=list)


class ChaosOpsObservation(BaseModel):
    done: bool = False
    reward: float | None = None
    view: RoleView
    step: int
    turn_role: AgentRole
    message: str = ""


class ChaosOpsState(BaseModel):
    """Ground truth of an episode; never handed to agents."""

    model_config = ConfigDict(validate_default=False)

    episode_id: str | None = None
    step_count: int = 0
    max_steps: int = 20
    difficulty: DifficultyTier = DifficultyTier.EASY
    failure_type: FailureType = FailureType.DB_DEADLOCK
    rogue_fleet_agent: str | None = None
    misleading_log_count: int = 0
    services: dict[str, ServiceMetrics] = Field(default_factory=dict)
    all_logs: list[LogLine] = Field(default_factory=list)
    all_alerts: list[Alert] = Field(default_factory=list)
    fleet_actions: list[FleetAgentLog] = Field(default_factory=list)
    chat_history: list[str] = Field(default_factory=list)
    private_chat: dict[str, list[str]] = Field(default_factory=dict)
    resolved: bool = False
    wrong_fixes: int = 0
    miscommunications: int = 0
    oversight_flags: list[str] = Field(default_factory=list)
    declared_root_cause: FailureType | None = None
    declared_root_cause_step: int | None = None
    cumulative_reward: float = 0.0


__all__ = [
    "FLEET_AGENT_NAMES",
    "SERVICE_NAMES",
    "ActionType",
    "AgentRole",
    "Alert",
    "ChaosOpsAction",
    "ChaosOpsObservation",
    "ChaosOpsState",
    "DifficultyTier",
    "FailureType",
    "FleetAgentLog",
    "LogLine",
    "RoleView",
    "ServiceHealth",
    "ServiceMetrics",
    "ServiceName",
]
