"""The rule-based player behind the mock: an action from a rendered observation."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from chaosops.agents.llm.render import RenderedView
from chaosops.env.failures import FAILURES
from chaosops.env.models import FLEET_AGENT_NAMES, ActionType, FailureType

_SEVERITY = MappingProxyType({"down": 0, "critical": 1, "degraded": 2})
_REPAIRS = frozenset((ActionType.RESTART, ActionType.ROLLBACK, ActionType.SCALE))


def _action(action_type: str, target: str | None = None, **args: Any) -> dict[str, Any]:
    return {"action_type": action_type, "target": target, "args": args}


def decide_action(view: RenderedView) -> dict[str, Any]:
    """Pick an action from a rendered view (what the mock answers)."""
    role = view.role or "sre"
    chat = " ".join(view.chat + view.inbox).lower()
    if role == "manager":
        if "resolved" in chat or "healthy" in chat:
            return _action("resolve")
        if not view.alerts:
            return _action("noop")
        return _action(
            "communicate",
            message="SRE: diagnose. Dev: stage a rollback. Oversight: watch the fleet.",
            to="all",
        )

    unhealthy = sorted(
        (name for name, m in view.metrics.items() if m["health"] in _SEVERITY),
        key=lambda name: _SEVERITY[view.metrics[name]["health"]],
    )
    if role == "oversight":
        alerts = " ".join(message.lower() for _, _, message in view.alerts)
        for agent, _, target in view.fleet_actions:
            if agent in FLEET_AGENT_NAMES and (
                not view.metrics or target in unhealthy or agent in alerts
            ):
                return _action("flag_rogue", agent)
        return _action("communicate", message="no rogue agent activity detected", to="all")

    if not unhealthy:
        return _action("communicate", message="systems nominal from my view", to="all")
    text = " ".join(
        [msg.lower() for _, _, msg in view.logs] + [m.lower() for _, _, m in view.alerts]
    )
    failure = recognised(text)
    if failure is not None and (move := _remedy(failure, unhealthy)) is not None:
        return move
    worst = unhealthy[0]  # nothing recognised: the worst service's likely repair
    m = view.metrics[worst]
    if m["replicas"] < 3 and m["cpu_pct"] > 80:
        return _action("scale", worst, replicas=4)
    return _action("restart", worst)


def recognised(text: str) -> FailureType | None:
    """The failure type whose signs (the failure table's) the lower-cased
    ``text`` shows most of; the table's first on a tie; None when it shows none."""
    counts = {
        failure: sum(sign in text for sign in rules.signs) for failure, rules in FAILURES.items()
    }
    best = max(counts, key=lambda failure: counts[failure])
    return best if counts[best] else None


def _remedy(failure: FailureType, unhealthy: list[str]) -> dict[str, Any] | None:
    """The first repair of the failure's plan still to make: on an unhealthy
    service, or an escalation."""
    for move in FAILURES[failure].plan:
        if move.kind is ActionType.ESCALATE:
            return _action("escalate")
        if move.kind in _REPAIRS and move.target in unhealthy:
            return _action(move.kind.value, move.target, **move.args)
    return None


GARBAGE = (
    "Let me think about this incident step by step before acting.",
    "I'd restart something, probably the database? Not sure.",
    "{action_type: restart, target: db",
    '{"action_type": "reboot_everything", "target": "all"}',
    '```json\n{"action": \n```',
)
