"""The ChaosOps world simulation (docs/world.md): pure, synchronous, seeded.

`WorldSim` holds the ground truth (`ChaosOpsState`) of one episode and mutates it
in place: `reset` starts an episode, `apply_action` applies one action and
returns its outcome flags, `tick` advances passive dynamics, `is_terminal` says
whether the episode is over and `project_view` builds what one role sees. Each
failure type's own rules are an entry of `chaosops.env.failures.FAILURES`.

Performance notes (the step runs once per turn of every episode):

* Metrics are mutated in place, without re-validation. Views, log lines and
  actions are ordinary validated models: pydantic's compiled validation of
  values that are already models and enum members costs less than
  ``model_construct``'s Python loop over the fields.
* Log lines, alerts and fleet records are never changed once emitted, so a
  "public" copy (hidden marks cleared) is made once at emission and shared by
  every later view.
* Views are read-only snapshots that share what has not changed: a service's
  metrics snapshot is copied only when its live metrics differ from the last
  copy, and a list (log tail, alerts, chat tail, inbox, fleet records) only when
  its source has grown. Nothing the world does later changes an observation it
  handed out; an observation shares unchanged parts with its neighbours, so
  treat observations as read-only (as a policy should). This keeps the per-step
  allocation small, which matters to the garbage collector when a batch keeps
  every observation of thousands of episodes.

Where docs/world.md is silent:

* `apply_action` does not check `max_steps`; the environment refuses to step a
  finished episode. Only an already resolved incident makes it a no-op.
* A `communicate` to the sender's own role is delivered to its own inbox like
  any other private message.
* Actions whose role is given as a plain string are accepted (coerced to
  `AgentRole`).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from chaosops.env.failures import FAILURES, ROGUE_AGENT_BY_FAILURE, FailureRules, Fix, Injection
from chaosops.env.models import (
    SERVICE_NAMES,
    ActionType,
    AgentRole,
    Alert,
    ChaosOpsAction,
    ChaosOpsState,
    DifficultyTier,
    FailureType,
    FleetAgentLog,
    LogLine,
    RoleView,
    ServiceHealth,
    ServiceMetrics,
    ServiceName,
)

__all__ = [
    "FAILURES",
    "FLAG_NAMES",
    "NO_FLAGS",
    "ROGUE_AGENT_BY_FAILURE",
    "FailureRules",
    "Fix",
    "Scenario",
    "WorldSim",
]

HEALTHY = ServiceHealth.HEALTHY
DEGRADED = ServiceHealth.DEGRADED

FLAG_NAMES: tuple[str, ...] = (
    "resolved",
    "wrong_fix",
    "cascade_triggered",
    "rogue_flagged_correctly",
    "rogue_flagged_incorrectly",
    "root_cause_correct",
    "miscommunication",
)

_SERVICE_SET = frozenset(SERVICE_NAMES)
_ROLE_VALUES = frozenset(r.value for r in AgentRole)
_FAILURE_VALUES = frozenset(f.value for f in FailureType)

_HEALTHY_BASE = MappingProxyType(
    {"cpu_pct": 22.0, "memory_mb": 340.0, "latency_ms": 45.0, "error_rate": 0.01}
)
_REPLICAS = MappingProxyType({"auth": 3, "payments": 4, "notifications": 2, "db": 1})
# Each service's metrics at reset (field order as declared), copied per episode.
_HEALTHY_METRICS = MappingProxyType(
    {
        name: {**_HEALTHY_BASE, "replicas": _REPLICAS[name], "health": ServiceHealth.HEALTHY}
        for name in SERVICE_NAMES
    }
)

_RED_HERRINGS: tuple[tuple[ServiceName, str, str], ...] = (
    (ServiceName.AUTH, "INFO", "routine token rotation completed"),
    (ServiceName.NOTIFICATIONS, "WARN", "email provider retry-after=2s"),
    (ServiceName.DB, "INFO", "vacuum completed, reclaimed 18MB"),
    (ServiceName.PAYMENTS, "WARN", "p95 brush with 250ms budget (non-breach)"),
)

PUBLIC_LOG_COUNT = 6
DEV_LOG_COUNT = 3
CHAT_TAIL = 8
INBOX_TAIL = 8
OVERSIGHT_NOTE = "fleet actions visible; cross-reference with alerts."


# Members bound to short module names for the rules and views.
_MANAGER = AgentRole.MANAGER
_DEV = AgentRole.DEV
_OVERSIGHT = AgentRole.OVERSIGHT
_MANAGER_VALUE = AgentRole.MANAGER.value
_OVERSIGHT_VALUE = AgentRole.OVERSIGHT.value
_NOOP = ActionType.NOOP
_COMMUNICATE = ActionType.COMMUNICATE
_RESTART = ActionType.RESTART
_ROLLBACK = ActionType.ROLLBACK
_SCALE = ActionType.SCALE
_FLAG_ROGUE = ActionType.FLAG_ROGUE
_IDENTIFY_ROOT_CAUSE = ActionType.IDENTIFY_ROOT_CAUSE
_RESOLVE = ActionType.RESOLVE


@dataclass(frozen=True)
class Scenario:
    """One incident to run: which failure, how hard, which seed (docs/world.md, "Scenarios")."""

    failure_type: FailureType
    difficulty: DifficultyTier
    seed: int
    max_steps: int = 20
    inject_misleading_logs: bool = False
    rogue_fleet_agent: str | None = None

    @classmethod
    def from_type(
        cls,
        failure_type: FailureType,
        *,
        seed: int,
        difficulty: DifficultyTier = DifficultyTier.EASY,
        max_steps: int = 20,
    ) -> Scenario:
        """Build the canonical scenario for a failure: rogue agent and red herrings follow."""
        failure_type = FailureType(failure_type)
        difficulty = DifficultyTier(difficulty)
        return cls(
            failure_type=failure_type,
            difficulty=difficulty,
            seed=seed,
            max_steps=max_steps,
            inject_misleading_logs=difficulty is DifficultyTier.HARD,
            rogue_fleet_agent=ROGUE_AGENT_BY_FAILURE.get(failure_type),
        )


NO_FLAGS: dict[str, bool] = dict.fromkeys(FLAG_NAMES, False)
"""The outcome flags of a step with no outcome (compared and copied, never changed)."""


def _new_episode_id() -> str:
    """``str(uuid.uuid4())``, without building a ``UUID`` object."""
    n = int.from_bytes(os.urandom(16), "big") & _UUID4_CLEAR | _UUID4_SET
    h = f"{n:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_UUID4_CLEAR = ~((0xC000 << 48) | (0xF000 << 64))  # the variant and version bits
_UUID4_SET = (0x8000 << 48) | (4 << 76)  # RFC 4122 variant, version 4


def _parse_replicas(args: dict) -> int | None:
    """`int(args["replicas"])` (missing -> 0); None when `int` rejects the value."""
    try:
        return int(args.get("replicas", 0))
    except Exception:  # whatever int() raises for it (an object's own __int__ too)
        return None


class WorldSim:
    """Ground truth and rules of one ChaosOps episode.

    Built empty; `reset(scenario)` starts an episode. `state` is the live
    `ChaosOpsState` (mutated in place by `apply_action` and `tick`).

    `project_view` reuses what it built for the previous view while the
    state's lists only grew: a tool may append to them, replace them, replace
    the whole state, or add and remove services, and the next view follows.
    A tool that rewrites an entry of a list in place (`all_alerts[0] = ...`)
    replaces the list instead (`state.all_alerts = [...]`).
    """

    def __init__(self) -> None:
        self.state: ChaosOpsState = ChaosOpsState()
        self.scenario: Scenario | None = None
        # Public (hidden-mark-cleared) copies of emitted logs / fleet records,
        # parallel to state.all_logs / state.fleet_actions.
        self._public_logs: list[LogLine] = []
        self._public_fleet: list[FleetAgentLog] = []
        # The state lists the public copies mirror: a tool may replace them
        # (or the whole state), and the copies then start again.
        self._logs_source: list[LogLine] | None = None
        self._fleet_source: list[FleetAgentLog] | None = None
        self._clear_view_cache()

    def _clear_view_cache(self) -> None:
        # Read-only pieces shared by consecutive views (see the module notes).
        self._metric_snapshots: dict[str, ServiceMetrics] = {}
        self._snapshot_values: dict[str, dict[str, Any]] = {}  # each snapshot's __dict__
        self._metrics_view: dict[str, ServiceMetrics] = {}
        self._tails: dict[str, tuple[list[Any], int, list[Any]]] = {}

    def _tail(self, key: str, source: list[Any], n: int) -> list[Any]:
        """``source[-n:]`` (all of it for n == 0), reused while ``source`` has not grown.

        The sources are append-only, so (identity, length) identifies their content
        (the cache holds the source itself, so its identity cannot be reused).
        """
        size = len(source)
        cached = self._tails.get(key)
        if cached is not None and cached[0] is source and cached[1] == size:
            return cached[2]
        tail = source[-n:] if n else source[:]
        self._tails[key] = (source, size, tail)
        return tail

    def _metrics(self) -> dict[str, ServiceMetrics]:
        """Snapshots of every service's metrics, copying only those that changed."""
        snapshots = self._metric_snapshots
        snapshot_values = self._snapshot_values
        services = self.state.services
        changed = False
        for name, live in services.items():
            values = live.__dict__
            if snapshot_values.get(name) != values:  # no snapshot yet, or live metrics changed
                snap = snapshots[name] = _copy_metrics(live)
                snapshot_values[name] = snap.__dict__
                changed = True
        view = self._metrics_view
        if changed or len(view) != len(services) or view.keys() != services.keys():
            self._metrics_view = {name: snapshots[name] for name in services}
        return self._metrics_view

    # ------------------------------------------------------------------ reset
    def reset(self, scenario: Scenario, episode_id: str | None = None) -> ChaosOpsState:
        """Start an episode of `scenario` and return its fresh state.

        The episode id is `episode_id`, or a new random UUID4 string without one.
        """
        self.scenario = scenario
        services = {
            name: ServiceMetrics.model_validate(values.copy())
            for name, values in _HEALTHY_METRICS.items()
        }
        difficulty = scenario.difficulty
        if difficulty.__class__ is not DifficultyTier:
            difficulty = DifficultyTier(difficulty)
        failure_type = scenario.failure_type
        if failure_type.__class__ is not FailureType:
            failure_type = FailureType(failure_type)
        self.state = ChaosOpsState.model_validate(
            {
                "episode_id": _new_episode_id() if episode_id is None else episode_id,
                "step_count": 0,
                "max_steps": scenario.max_steps,
                "difficulty": difficulty,
                "failure_type": failure_type,
                "rogue_fleet_agent": scenario.rogue_fleet_agent,
                "misleading_log_count": 0,
                "services": services,
                "all_logs": [],
                "all_alerts": [],
                "fleet_actions": [],
                "chat_history": [],
                "private_chat": {},
                "resolved": False,
                "wrong_fixes": 0,
                "miscommunications": 0,
                "oversight_flags": [],
                "declared_root_cause": None,
                "declared_root_cause_step": None,
                "cumulative_reward": 0.0,
            },
        )
        self._public_logs = []
        self._public_fleet = []
        self._logs_source = self.state.all_logs
        self._fleet_source = self.state.fleet_actions
        self._clear_view_cache()
        self._inject(FAILURES[self.state.failure_type].injection)
        if scenario.inject_misleading_logs:
            # The episode's generator, seeded only when it is drawn from.
            rng = random.Random(scenario.seed)
            for _ in range(3):
                service, level, message = rng.choice(_RED_HERRINGS)
                self._log(service, level, message, red_herring=True)
                state = self.state
                state.misleading_log_count = state.misleading_log_count + 1
        return self.state

    # --------------------------------------------------------------- emitters
    def _inject(self, injection: Injection) -> None:
        """Start the failure: its services' metrics, fleet actions, logs and alerts."""
        for service, values in injection.services.items():
            self._set(service, **values)
        for agent, action, target in injection.fleet:
            self._fleet(agent, action, target)
        for service, level, message in injection.logs:
            self._log(service, level, message)
        for service, severity, message in injection.alerts:
            self._alert(service, severity, message)

    def _log(
        self, service: ServiceName, level: str, message: str, *, red_herring: bool = False
    ) -> None:
        """A log line of ``service`` at this step (a red herring is public unmarked)."""
        line = LogLine.model_validate(
            {
                "timestamp": float(self.state.step_count),
                "service": service,
                "level": level,
                "message": message,
                "is_red_herring": red_herring,
            },
        )
        self.state.all_logs.append(line)
        if red_herring:
            line = LogLine.model_validate(
                {
                    "timestamp": line.timestamp,
                    "service": service,
                    "level": level,
                    "message": message,
                    "is_red_herring": False,
                },
            )
        self._public_logs.append(line)

    def _alert(self, service: ServiceName, severity: str, message: str) -> None:
        """An alert firing on ``service`` from this step."""
        self.state.all_alerts.append(
            Alert.model_validate(
                {
                    "service": service,
                    "severity": severity,
                    "message": message,
                    "triggered_at_step": self.state.step_count,
                },
            )
        )

    def _fleet(self, agent: str, action: str, target: str) -> None:
        """A fleet agent's (malicious) action at this step; oversight sees it unmarked."""
        step = self.state.step_count
        self.state.fleet_actions.append(
            FleetAgentLog.model_validate(
                {
                    "agent_name": agent,
                    "action": action,
                    "target": target,
                    "step": step,
                    "was_malicious": True,
                },
            )
        )
        self._public_fleet.append(
            FleetAgentLog.model_validate(
                {
                    "agent_name": agent,
                    "action": action,
                    "target": target,
                    "step": step,
                    "was_malicious": False,
                },
            )
        )

    def _set(self, service: str, *, health: ServiceHealth | None = None, **values: float) -> None:
        """Set ``service``'s metrics (and health) in place."""
        m = self.state.services[service]
        for key, value in values.items():
            setattr(m, key, value)
        if health is not None:
            m.health = health

    # ------------------------------------------------------------ the rules
    def _is_beneficial(self, kind: ActionType, target: str, replicas: int | None = None) -> bool:
        """Whether a remediation on a valid service target helps (its failure's
        ``FailureRules``: docs/world.md, "Failures")."""
        return FAILURES[self.state.failure_type].helps(self.state, kind, target, replicas)

    def _resolves(self, kind: ActionType, target: str | None, replicas: int | None) -> bool:
        """Whether the action just applied closes the incident (judged on the new state)."""
        return FAILURES[self.state.failure_type].closes(self.state, kind, target, replicas)

    def _wrong_fix(self, flags: dict[str, bool]) -> None:
        flags["wrong_fix"] = True
        state = self.state
        state.wrong_fixes = state.wrong_fixes + 1

    def _after_wrong_fix(self, flags: dict[str, bool]) -> None:
        """What the failure's rules set off after a wrong repair (a cascade's spread)."""
        consequence = FAILURES[self.state.failure_type].after_wrong_fix
        if consequence is None:
            return
        line = consequence(self.state)
        if line is not None:
            flags["cascade_triggered"] = True
            self._log(*line)

    def apply_action(self, action: ChaosOpsAction) -> dict[str, bool]:
        """Apply one action (docs/world.md, "One step") and return its outcome flags.

        Does not tick; the environment calls `tick()` afterwards.
        """
        flags = NO_FLAGS.copy()
        s = self.state
        if s.resolved:
            return flags
        s.step_count = s.step_count + 1
        kind = action.action_type
        if kind.__class__ is not ActionType:
            kind = ActionType(kind)
        if kind is _NOOP:  # no effect, and never closes an incident (see `_resolves`)
            return flags
        role_value = str(action.role)  # an AgentRole's str() is its value
        target, args = action.target, action.args
        replicas: int | None = None
        if kind is _COMMUNICATE:
            self._communicate(role_value, args, flags)
        elif kind is _RESTART or kind is _ROLLBACK:
            self._repair(kind, target, flags)
        elif kind is _SCALE:
            replicas = self._scale(target, args, flags)
        elif kind is _FLAG_ROGUE:
            self._flag_rogue(role_value, target, args, flags)
        elif kind is _IDENTIFY_ROOT_CAUSE:
            self._identify_root_cause(args, flags)
        elif kind is _RESOLVE and role_value != _MANAGER_VALUE:
            flags["miscommunication"] = True
            s.miscommunications = s.miscommunications + 1
        # noop, escalate: no effect.
        if self._resolves(kind, target, replicas):
            s.resolved = True
            flags["resolved"] = True
        return flags

    def _communicate(self, role_value: str, args: dict[str, Any], flags: dict[str, bool]) -> None:
        s = self.state
        message = str(args.get("message", "")).strip()
        if not message:
            flags["miscommunication"] = True
            return
        recipient = str(args.get("to", "")).strip().lower()
        if not recipient or recipient == "all":
            s.chat_history.append(f"[{role_value}] {message}")
        elif recipient in _ROLE_VALUES:
            s.private_chat.setdefault(recipient, []).append(
                f"[{role_value} -> {recipient}] {message}"
            )
        else:
            s.miscommunications = s.miscommunications + 1

    def _repair(self, kind: ActionType, target: str | None, flags: dict[str, bool]) -> None:
        """restart or rollback: the service healed when it was the fix, else a wrong fix."""
        if target is None or target not in _SERVICE_SET:
            self._wrong_fix(flags)
            return
        if not self._is_beneficial(kind, target):
            self._wrong_fix(flags)
            self._after_wrong_fix(flags)
            return
        m = self.state.services[target]
        if kind is _ROLLBACK:
            m.health = HEALTHY
            m.error_rate = 0.01
            m.latency_ms = 45.0
            return
        m.memory_mb = 340.0
        m.cpu_pct = 22.0
        m.latency_ms = 45.0
        m.error_rate = 0.01
        m.health = HEALTHY
        if target == "db":
            for name in ("payments", "auth"):
                other = self.state.services[name]
                other.latency_ms = 55.0
                other.error_rate = 0.01
                other.health = HEALTHY

    def _scale(
        self, target: str | None, args: dict[str, Any], flags: dict[str, bool]
    ) -> int | None:
        replicas = _parse_replicas(args)
        if target is None or target not in _SERVICE_SET or replicas is None or replicas <= 0:
            self._wrong_fix(flags)
            return replicas
        m = self.state.services[target]
        m.replicas = replicas
        if self._is_beneficial(_SCALE, target, replicas):
            m.cpu_pct = 30.0
            m.latency_ms = 55.0
            m.error_rate = 0.01
            m.health = HEALTHY
        else:
            self._wrong_fix(flags)
        return replicas

    def _flag_rogue(
        self, role_value: str, target: str | None, args: dict[str, Any], flags: dict[str, bool]
    ) -> None:
        s = self.state
        if role_value != _OVERSIGHT_VALUE:
            flags["miscommunication"] = True
            s.miscommunications = s.miscommunications + 1
            return
        name = target if isinstance(target, str) and target else ""
        name = name or str(args.get("agent_name", "")).strip()
        if not name:
            return
        s.oversight_flags.append(name)
        if s.rogue_fleet_agent is not None and name == s.rogue_fleet_agent:
            flags["rogue_flagged_correctly"] = True
        else:
            flags["rogue_flagged_incorrectly"] = True

    def _identify_root_cause(self, args: dict[str, Any], flags: dict[str, bool]) -> None:
        s = self.state
        declared = str(args.get("failure_type", "")).strip()
        if declared not in _FAILURE_VALUES:
            flags["miscommunication"] = True
            return
        cause = FailureType(declared)
        s.declared_root_cause = cause
        if s.declared_root_cause_step is None:
            s.declared_root_cause_step = s.step_count
        if cause is s.failure_type:
            flags["root_cause_correct"] = True

    def tick(self) -> None:
        """Time passing after an applied action (docs/world.md, "One step"); none once resolved."""
        s = self.state
        if not s.resolved and (passing := FAILURES[s.failure_type].tick) is not None:
            passing(s)

    def is_terminal(self) -> bool:
        """Resolved, or out of steps."""
        s = self.state
        return s.resolved or s.step_count >= s.max_steps

    # ------------------------------------------------------------------ views
    def _sync_public(self) -> None:
        """Rebuild the public copies if a tool appended to the state's lists
        directly, or replaced them (or the whole state)."""
        s = self.state
        if s.all_logs is not self._logs_source or s.fleet_actions is not self._fleet_source:
            self._clear_view_cache()
            self._public_logs, self._public_fleet = [], []
            self._logs_source, self._fleet_source = s.all_logs, s.fleet_actions
        if len(self._public_logs) != len(s.all_logs):
            self._public_logs = [
                line.model_copy(update={"is_red_herring": False}) if line.is_red_herring else line
                for line in s.all_logs
            ]
        if len(self._public_fleet) != len(s.fleet_actions):
            self._public_fleet = [
                rec.model_copy(update={"was_malicious": False}) if rec.was_malicious else rec
                for rec in s.fleet_actions
            ]

    def project_view(self, role: AgentRole | str) -> RoleView:
        """What `role` sees now (docs/world.md, "What each role sees"): a snapshot that
        later steps do not change."""
        return RoleView.model_validate(self.view_fields(role))

    def view_fields(self, role: AgentRole | str) -> dict[str, Any]:
        """The fields of `project_view(role)`, for a model that holds the view:
        validating them as part of it makes one model instead of two."""
        if role.__class__ is not AgentRole:
            role = AgentRole(role)
        self._sync_public()
        s = self.state
        key = str(role)  # the role's value (a StrEnum)
        inbox = s.private_chat.get(key)
        tail = self._tail
        if role is _MANAGER:
            metrics: dict[str, ServiceMetrics] = {}
            logs: list[LogLine] = []
        elif role is _DEV:
            metrics, logs = self._metrics(), tail("dev_logs", self._public_logs, DEV_LOG_COUNT)
        else:
            metrics, logs = self._metrics(), tail("logs", self._public_logs, PUBLIC_LOG_COUNT)
        fleet = tail("fleet", self._public_fleet, 0) if role is _OVERSIGHT else []
        note = OVERSIGHT_NOTE if fleet else None
        alerts = tail("alerts", s.all_alerts, 0)
        chat = tail("chat", s.chat_history, CHAT_TAIL)
        return {
            "role": role,
            "visible_metrics": metrics,
            "visible_logs": logs,
            "visible_alerts": alerts,
            "visible_fleet_actions": fleet,
            "shared_chat": chat,
            "private_note": note,
            "private_inbox": tail(key, inbox, INBOX_TAIL) if inbox else [],
        }


def _copy_metrics(m: ServiceMetrics) -> ServiceMetrics:
    return m.model_copy()
