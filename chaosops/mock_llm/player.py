"""The rule-based player behind the mock: an action from a rendered observation."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from chaosops.agents.llm.render import RenderedView
from chaosops.env.models import FLEET_AGENT_NAMES

_SEVERITY = MappingProxyType({"down": 0, "critical": 1, "degraded": 2})


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
    logs = [(svc, msg.lower()) for svc, _, msg in view.logs]
    text = " ".join(msg for _, msg in logs)
    alerts = " ".join(message.lower() for _, _, message in view.alerts)
    if any(k in text or k in alerts for k in ("shadow cluster", "misrout", "backends healthy")):
        return _action("escalate")
    for svc, msg in logs:
        if svc in unhealthy and "config" in msg and ("rolled out" in msg or "pushed" in msg):
            return _action("rollback", svc)
    if "deadlock" in text and "db" in unhealthy:
        if "notifications" in unhealthy:
            return _action("restart", "notifications")
        return _action("restart", "db")
    if "db" in unhealthy and ("no space left" in text or "disk usage" in text):
        return _action("scale", "db", replicas=2)
    if "auth" in unhealthy and ("nxdomain" in text or "dns" in text):
        return _action("restart", "auth")
    worst = unhealthy[0]
    m = view.metrics[worst]
    if m["replicas"] < 3 and m["cpu_pct"] > 80:
        return _action("scale", worst, replicas=4)
    return _action("restart", worst)


GARBAGE = (
    "Let me think about this incident step by step before acting.",
    "I'd restart something, probably the database? Not sure.",
    "{action_type: restart, target: db",
    '{"action_type": "reboot_everything", "target": "all"}',
    '```json\n{"action": \n```',
)
