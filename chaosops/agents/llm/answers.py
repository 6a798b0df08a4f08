"""What a tool answers a model: the change in its role's view since its last move.

A model that plays through tools reads the whole view once, at ``reset``.
After a move, the whole view again would cost it about 270 tokens a call, most
of them lines it has already read, and its completion budget with it (TRL
counts tool answers in ``max_completion_length``). So a tool answers with what
changed: the services whose health changed (or that came into view), the new
alerts, logs, fleet actions, chat and inbox lines, the note if it changed, and
the moves the role may now make.
"""

from __future__ import annotations

from types import MappingProxyType

from chaosops.agents.llm.moves import moves_for
from chaosops.agents.llm.render import render_head, render_view
from chaosops.env.models import AgentRole, ChaosOpsObservation, RoleView

__all__ = ["describe", "describe_change"]


def describe(obs: ChaosOpsObservation, role: AgentRole) -> str:
    """What ``role`` sees, as text for a model, with the moves it may make."""
    head = render_head(obs, role)
    if obs.done:
        return f"{head}\nThe episode is over."
    return f"{head}\n\n{render_view(obs.view)}\n{_moves(obs, role)}"


def describe_change(before: RoleView | None, obs: ChaosOpsObservation, role: AgentRole) -> str:
    """What changed in ``role``'s view since ``before`` (its view at its last
    move), as text for a model; the whole view when there is no ``before``."""
    if before is None:
        return describe(obs, role)
    head = render_head(obs, role)
    changed = render_view(_delta(before, obs.view), titles=_TITLES)
    body = changed or "Nothing else changed in your view."
    if obs.done:
        return f"{head}\n{body}\nThe episode is over."
    return f"{head}\n{body}\n{_moves(obs, role)}"


def _moves(obs: ChaosOpsObservation, role: AgentRole) -> str:
    return f"Your moves: {', '.join(kind.value for kind in moves_for(obs, role).kinds)}."


def _delta(before: RoleView, now: RoleView) -> RoleView:
    """A view holding only what ``now`` adds to ``before``."""
    old_health = {name: m.health for name, m in before.visible_metrics.items()}
    return RoleView(
        role=now.role,
        visible_metrics={
            name: m for name, m in now.visible_metrics.items() if old_health.get(name) != m.health
        },
        visible_alerts=[a for a in now.visible_alerts if a not in before.visible_alerts],
        visible_logs=[g for g in now.visible_logs if g not in before.visible_logs],
        visible_fleet_actions=[
            f for f in now.visible_fleet_actions if f not in before.visible_fleet_actions
        ],
        shared_chat=now.shared_chat[_common(before.shared_chat, now.shared_chat) :],
        private_inbox=now.private_inbox[_common(before.private_inbox, now.private_inbox) :],
        private_note=now.private_note if now.private_note != before.private_note else None,
    )


def _common(old: list[str], new: list[str]) -> int:
    """How many lines ``new`` shares with ``old`` at its start (a window of the
    chat may slide: then every line of ``new`` not among ``old``'s is new)."""
    if new[: len(old)] == old:
        return len(old)
    seen = set(old)
    return next((i for i, line in enumerate(new) if line not in seen), len(new))


# The sections of a change, retitled (an empty one is left out)
_TITLES = MappingProxyType({"METRICS": "HEALTH CHANGED", "ALERTS": "NEW ALERTS", "LOGS": "NEW LOGS",
           "FLEET ACTIONS": "NEW FLEET ACTIONS", "CHAT": "NEW CHAT", "INBOX": "NEW INBOX",
           "NOTE": "NEW NOTE"})  # fmt: skip
