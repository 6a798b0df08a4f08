"""Whether a parsed answer is an action for this role's view.

A model's answer may be well-formed JSON and still no action: the answer
format's own placeholder as a target (``"<service, agent or null>"``), a
service the role cannot see, an action its role may not take, or arguments
the action does not have. Such an answer is a parse error saying which, and the
turn plays the fallback; it is never applied as a wrong fix.

The targets of a view are the services it shows (metrics, alerts, logs) and,
for oversight, the fleet agents. Only oversight flags rogues and only the
manager resolves; a message goes to all or to a role, and a root cause is a
failure type (docs/world.md, "One step", counts any of these otherwise as a
miscommunication, a move no answer means to make). A scale asks for 1 to
:data:`MAX_REPLICAS` replicas and a message has 1 to :data:`MAX_MESSAGE_CHARS`
characters: the bounds the schema and the prompts advertise, so that no move
outside them (a billion replicas, say) is ever applied and rewarded.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from chaosops.env.models import (
    FLEET_AGENT_NAMES,
    ActionType,
    AgentRole,
    ChaosOpsAction,
    ChaosOpsObservation,
    FailureType,
)

__all__ = [
    "ACTION_ARGS",
    "FAILURES",
    "FAILURE_NAMES",
    "MAX_MESSAGE_CHARS",
    "MAX_REPLICAS",
    "ONLY_ROLE",
    "ON_A_SERVICE",
    "RECIPIENTS",
    "RECIPIENT_NAMES",
    "IllegalMove",
    "services_of",
    "view_problem",
]

FLEET_AGENTS = frozenset(FLEET_AGENT_NAMES)
RECIPIENT_NAMES = ("all", *(role.value for role in AgentRole))
FAILURE_NAMES = tuple(failure.value for failure in FailureType)
RECIPIENTS = frozenset(RECIPIENT_NAMES)
FAILURES = frozenset(FAILURE_NAMES)


class IllegalMove(ValueError):
    """A move the rules refuse in a role's view, or a move after the end."""


MAX_REPLICAS = 20
"""The most replicas a scale may ask for (the world takes any positive count;
the bound keeps a model from buying a fix with an absurd fleet, and a
constrained model from writing digits until its token limit)."""

MAX_MESSAGE_CHARS = 200
"""The longest message a communicate may carry."""

ACTION_ARGS: Mapping[ActionType, dict[str, type]] = MappingProxyType(
    {
        ActionType.SCALE: {"replicas": int},
        ActionType.COMMUNICATE: {"message": str, "to": str},
        ActionType.IDENTIFY_ROOT_CAUSE: {"failure_type": str},
        ActionType.FLAG_ROGUE: {"agent_name": str},
    }
)
"""The arguments each action takes, with their types (an action not named takes none)."""

_REQUIRED = MappingProxyType(
    {
        ActionType.SCALE: "replicas",
        ActionType.COMMUNICATE: "message",
        ActionType.IDENTIFY_ROOT_CAUSE: "failure_type",
    }
)
ONLY_ROLE = MappingProxyType(
    {ActionType.FLAG_ROGUE: AgentRole.OVERSIGHT, ActionType.RESOLVE: AgentRole.MANAGER}
)
ON_A_SERVICE = frozenset((ActionType.RESTART, ActionType.ROLLBACK, ActionType.SCALE))


def view_problem(
    action: ChaosOpsAction, obs: ChaosOpsObservation, services: frozenset[str] | None = None
) -> str | None:
    """Why ``action`` is no action for its role's view in ``obs``, or None
    (``services``: the view's, when the caller has them already)."""
    kind = action.action_type
    role = AgentRole(getattr(action.role, "value", action.role))
    allowed = ONLY_ROLE.get(kind)
    if allowed is not None and role is not allowed:
        return f"{kind.value} is the {allowed.value}'s action, not the {role.value}'s"
    problem = _args_problem(kind, action.args)
    if problem is not None:
        return problem
    shown = services_of(obs) if services is None else services
    return _target_problem(kind, action.target, action.args, role, shown)


def _args_problem(kind: ActionType, args: Mapping[str, Any]) -> str | None:
    accepted = ACTION_ARGS.get(kind, {})
    if extra := sorted(set(args) - set(accepted)):
        takes = ", ".join(accepted) or "no args"
        return f"{kind.value} takes {takes}, not {', '.join(map(repr, extra))}"[:200]
    for name, expected in accepted.items():
        value = args.get(name)
        if value is None:
            if _REQUIRED.get(kind) == name:
                return f"{kind.value} needs args.{name}"
        elif not isinstance(value, expected) or isinstance(value, bool):
            return f"args.{name} of {kind.value} must be {expected.__name__}, got {value!r:.40}"
    return _value_problem(kind, args)


def _value_problem(kind: ActionType, args: Mapping[str, Any]) -> str | None:
    """A replica count or a message length outside the advertised bounds, a
    recipient that is no role, or a root cause that is no failure type (read
    as the world reads them: stripped, the recipient lower-cased)."""
    # the arguments a move requires are there (checked before)
    if kind is ActionType.SCALE and not 1 <= args["replicas"] <= MAX_REPLICAS:
        return f"args.replicas of scale must be 1 to {MAX_REPLICAS}, got {args['replicas']}"
    if kind is ActionType.COMMUNICATE and not 1 <= len(args["message"]) <= MAX_MESSAGE_CHARS:
        return (
            f"args.message of communicate must have 1 to {MAX_MESSAGE_CHARS} characters, "
            f"got {len(args['message'])}"
        )
    to = args.get("to")
    if kind is ActionType.COMMUNICATE and to is not None and to.strip():
        if to.strip().lower() not in RECIPIENTS:
            return f"args.to {to!r:.40} is neither all nor a role ({_list(RECIPIENTS)})"
    failure = args.get("failure_type", "")
    if kind is ActionType.IDENTIFY_ROOT_CAUSE and failure.strip() not in FAILURES:
        return f"args.failure_type {failure!r:.40} is no failure type ({_list(FAILURES)})"
    return None


def _target_problem(
    kind: ActionType, target: str | None, args: Mapping[str, Any], role: AgentRole,
    services: frozenset[str],
) -> str | None:  # fmt: skip
    agents = FLEET_AGENTS if role is AgentRole.OVERSIGHT else frozenset()
    if kind in ON_A_SERVICE:
        if target not in services:
            shown = _list(services)
            return f"{kind.value} target {target!r:.60} is no service of the view ({shown})"
        return None
    if kind is ActionType.FLAG_ROGUE:
        flagged = target if target is not None else args.get("agent_name")
        if flagged not in agents:
            return f"flag_rogue names {flagged!r:.60}, no fleet agent ({_list(agents)})"
        return None
    if target is not None and target not in services | agents:
        return f"target {target!r:.60} names no service or agent of the view"
    return None


def services_of(obs: ChaosOpsObservation) -> frozenset[str]:
    """The services a view shows: in its metrics, alerts or logs."""
    view = obs.view
    # str() of a ServiceName (a StrEnum) is its value, and cheaper than .value
    names = {str(name) for name in view.visible_metrics}
    names.update(str(a.service) for a in view.visible_alerts)
    names.update(str(log.service) for log in view.visible_logs)
    return frozenset(names - FLEET_AGENTS)


def _list(names: frozenset[str]) -> str:
    return ", ".join(sorted(names)) or "none"
