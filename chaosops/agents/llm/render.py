"""Compact text rendering of what a role sees, and the prompt built from it.

The rendering is line oriented so that a model reads it easily and so that
:func:`read_rendered` (used by the local mock server) can read it back::

    ChaosOps incident, step 2. Your role: sre.
    Last event: sre restarted db

    ## METRICS
    service        health     cpu%  mem_mb  latency_ms  error_rate  replicas
    auth           degraded     22     340         950        0.32         3
    ## ALERTS
    - [page] payments: payment error rate > 30% (step 0)
    ## LOGS
    - [t=0] db ERROR: deadlock detected on txn_id=0x8f4a
    ## FLEET ACTIONS
    - [step 0] autoscaler scale_down -> payments
    ## CHAT
    - [sre] restarting db
    ## INBOX
    (none)
    ## NOTE
    (none)
    ## ANSWER
    (the moves of this role in this view, one JSON object a line)

Every entry is one line: text that came from other agents (chat, inbox) has its
line breaks replaced by spaces, so it can never open a section of its own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from typing import Any

from chaosops.agents.llm.moves import moves_for
from chaosops.env.failures import FAILURES
from chaosops.env.models import ActionType, AgentRole, ChaosOpsObservation, RoleView

__all__ = [
    "RenderedView",
    "build_messages",
    "fold_system_prompt",
    "read_rendered",
    "render_head",
    "render_observation",
    "render_view",
    "right_for",
    "system_prompt",
]

_METRICS_HEADER = (
    f"{'service':<14} {'health':<9} {'cpu%':>5} {'mem_mb':>7} {'latency_ms':>11}"
    f" {'error_rate':>11} {'replicas':>9}"
)
_NONE = "(none)"


def _one_line(text: object) -> str:
    if text.__class__ is str:
        return _one_line_text(text)
    return " ".join(str(text).split())


@lru_cache(maxsize=4096)
def _one_line_text(text: str) -> str:
    # The same log lines, alerts and chat lines come back every turn of an
    # episode: each is put on one line once.
    return " ".join(text.split())


def _num(value: float) -> str:
    return f"{value:.6g}"


def _value(member: Any) -> Any:
    return getattr(member, "value", member)


# Rows are formatted once per distinct content: the same metrics, alerts, log
# lines and chat come back turn after turn and episode after episode, and
# formatting their numbers is most of what a prompt costs to render.
@lru_cache(maxsize=4096)
def _metrics_row(
    name: str, health: Any, cpu: float, memory: float, latency: float, errors: float, replicas: int
) -> str:
    return (
        f"{name:<14} {_value(health):<9} {_num(cpu):>5} {_num(memory):>7}"
        f" {_num(latency):>11} {_num(errors):>11} {replicas:>9}"
    )


@lru_cache(maxsize=4096)
def _alert_row(severity: str, service: Any, message: str, step: int) -> str:
    return f"- [{_one_line(severity)}] {_value(service)}: {_one_line(message)} (step {step})"


@lru_cache(maxsize=4096)
def _log_row(timestamp: float, service: Any, level: str, message: str) -> str:
    return f"- [t={_num(timestamp)}] {_value(service)} {_one_line(level)}: {_one_line(message)}"


@lru_cache(maxsize=4096)
def _fleet_row(step: int, agent: str, action: str, target: str) -> str:
    return f"- [step {step}] {_one_line(agent)} {_one_line(action)} -> {_one_line(target)}"


@lru_cache(maxsize=4096)
def _bullet(text: str) -> str:
    return f"- {_one_line(text)}"


def _section(
    lines: list[str], title: str, entries: list[str], titles: Mapping[str, str] | None = None
) -> None:
    if titles is not None:  # a section left out when empty, under the title given
        if entries:
            lines.append(f"## {titles.get(title, title)}")
            lines.extend(entries)
        return
    lines.append(f"## {title}")
    lines.extend(entries if entries else [_NONE])


def render_view(view: RoleView, titles: Mapping[str, str] | None = None) -> str:
    """Render the sections of a role's view (metrics, alerts, logs, ...).

    With ``titles`` (section title -> title shown), only the sections that
    hold an entry are rendered, retitled: what a partial view, such as the
    change since a role's last move, needs."""
    lines: list[str] = []
    metrics = [_METRICS_HEADER] if view.visible_metrics else []
    metrics.extend(
        _metrics_row(name, m.health, m.cpu_pct, m.memory_mb, m.latency_ms, m.error_rate, m.replicas)
        for name, m in view.visible_metrics.items()
    )
    _section(lines, "METRICS", metrics, titles)
    alerts = view.visible_alerts
    _section(
        lines,
        "ALERTS",
        [_alert_row(a.severity, a.service, a.message, a.triggered_at_step) for a in alerts],
        titles,
    )
    logs = view.visible_logs
    _section(
        lines, "LOGS", [_log_row(g.timestamp, g.service, g.level, g.message) for g in logs], titles
    )
    fleet = view.visible_fleet_actions
    _section(
        lines,
        "FLEET ACTIONS",
        [_fleet_row(f.step, f.agent_name, f.action, f.target) for f in fleet],
        titles,
    )
    _section(lines, "CHAT", [_bullet(c) for c in view.shared_chat], titles)
    _section(lines, "INBOX", [_bullet(c) for c in view.private_inbox], titles)
    _section(lines, "NOTE", [_one_line(view.private_note)] if view.private_note else [], titles)
    return "\n".join(lines)


def render_head(obs: ChaosOpsObservation, role: AgentRole) -> str:
    """The opening lines of a turn's text: the step, the role, the last event."""
    head = f"ChaosOps incident, step {obs.step}. Your role: {role.value}."
    if obs.message:
        head += f"\nLast event: {_one_line(obs.message)}"
    return head


def render_observation(obs: ChaosOpsObservation, role: AgentRole | str | None = None) -> str:
    """Render an observation as the user message of a turn, ending with the
    answer format: the moves this role may make in this view (:mod:`.moves`)."""
    role = AgentRole(getattr(role, "value", role) or obs.view.role)
    head = render_head(obs, role)
    return f"{head}\n\n{render_view(obs.view)}\n## ANSWER\n{moves_for(obs, role).text}"


@cache
def system_prompt(role: AgentRole | str) -> str:
    """The system prompt of a role, read from the package data ``chaosops/prompts``,
    with the failure table rendered in: ``{failure_types}`` lists the types,
    and ``{right_for:ACTION}`` says after an action which failures it fixes."""
    name = AgentRole(getattr(role, "value", role)).value
    text = (resources.files("chaosops") / "prompts" / f"{name}.md").read_text(encoding="utf-8")
    text = text.replace("{failure_types}", ", ".join(failure.value for failure in FAILURES))
    return _RIGHT_FOR.sub(lambda found: right_for(ActionType(found[1])), text)


_RIGHT_FOR = re.compile(r"\{right_for:(\w+)\}")


def right_for(kind: ActionType) -> str:
    """What an action fixes, from each failure's hint (``what shows it: its fix``):
    `` Right for: what shows the first (its fix); the second's (its fix).``, or nothing."""
    cases = [
        _case(rules.hint) for rules in FAILURES.values() if any(f.kind is kind for f in rules.fixes)
    ]
    return f" Right for: {'; '.join(cases)}." if cases else ""


def _case(hint: str) -> str:
    """``what shows it (its fix)``, the fix's first clause: a short line holds more."""
    shows, fix = hint.split(": ", 1)
    return f"{shows} ({fix.split('; ')[0]})"


def build_messages(obs: ChaosOpsObservation, role: AgentRole | str) -> list[dict[str, Any]]:
    """The chat messages of one turn: the role's system prompt and the rendered view."""
    return [
        {"role": "system", "content": system_prompt(role)},
        {"role": "user", "content": render_observation(obs, role)},
    ]


def fold_system_prompt(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages without a system message: its text opens the first user
    message (for models whose chat template has no system role)."""
    if not messages or messages[0]["role"] != "system":
        return messages
    system, rest = messages[0], [dict(m) for m in messages[1:]]
    first = next((m for m in rest if m["role"] == "user"), None)
    if first is None:
        return [{"role": "user", "content": system["content"]}, *rest]
    first["content"] = f"{system['content']}\n\n{first['content']}"
    return rest


# --- reading a rendering back (for the mock server and tests) -------------------


@dataclass
class RenderedView:
    """What :func:`read_rendered` recovers from a rendered observation."""

    role: str | None = None
    step: int | None = None
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    alerts: list[tuple[str, str, str]] = field(default_factory=list)
    """(severity, service, message)"""
    logs: list[tuple[str, str, str]] = field(default_factory=list)
    """(service, level, message)"""
    fleet_actions: list[tuple[str, str, str]] = field(default_factory=list)
    """(agent, action, target)"""
    chat: list[str] = field(default_factory=list)
    inbox: list[str] = field(default_factory=list)
    note: str | None = None


def _parse_metric_row(line: str) -> tuple[str, dict[str, Any]] | None:
    parts = line.split()
    if len(parts) != 7 or parts[0] == "service":
        return None
    try:
        return parts[0], {
            "health": parts[1],
            "cpu_pct": float(parts[2]),
            "memory_mb": float(parts[3]),
            "latency_ms": float(parts[4]),
            "error_rate": float(parts[5]),
            "replicas": int(parts[6]),
        }
    except ValueError:
        return None


def _entry(line: str) -> str | None:
    return line[2:] if line.startswith("- ") else None


def read_rendered(text: str) -> RenderedView:
    """Read back a text made by :func:`render_observation`; unknown lines are skipped."""
    out = RenderedView()
    section = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith("ChaosOps incident, step "):
            head = line.removeprefix("ChaosOps incident, step ")
            step, _, rest = head.partition(".")
            out.step = int(step) if step.isdigit() else None
            if "Your role:" in rest:
                out.role = rest.split("Your role:", 1)[1].strip().rstrip(".") or None
            continue
        if line.startswith("## "):
            section = line[3:].strip()
            continue
        if not line or line == _NONE:
            continue
        if section == "METRICS":
            row = _parse_metric_row(line)
            if row:
                out.metrics[row[0]] = row[1]
        elif section == "ALERTS" and (e := _entry(line)):
            sev, _, rest = e.partition("] ")
            service, _, message = rest.partition(": ")
            out.alerts.append((sev.lstrip("["), service, message.rsplit(" (step ", 1)[0]))
        elif section == "LOGS" and (e := _entry(line)):
            _, _, rest = e.partition("] ")
            head, _, message = rest.partition(": ")
            service, _, level = head.partition(" ")
            out.logs.append((service, level, message))
        elif section == "FLEET ACTIONS" and (e := _entry(line)):
            _, _, rest = e.partition("] ")
            head, _, target = rest.partition(" -> ")
            agent, _, action = head.partition(" ")
            out.fleet_actions.append((agent, action, target))
        elif section == "CHAT" and (e := _entry(line)) is not None:
            out.chat.append(e)
        elif section == "INBOX" and (e := _entry(line)) is not None:
            out.inbox.append(e)
        elif section == "NOTE":
            out.note = line
    return out
