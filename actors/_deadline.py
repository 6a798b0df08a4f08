"""Per-role turn deadlines."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._types import TurnTimeout


def timeouts_by_role(turn_timeout: TurnTimeout, roles: Iterable[Any]) -> dict[Any, float | None]:
    """Seconds per role (None: no deadline) from a ``turn_timeout`` argument.

    ``turn_timeout``: seconds for every role, a mapping role -> seconds (roles
    not in it have no deadline), or None. Raises ValueError, saying what is
    accepted, for anything else or for seconds that are not a number >= 0.
    :func:`run_episode` checks its argument with it before the episode starts,
    so the per-turn path is a dict lookup.
    """
    if turn_timeout is None:
        return dict.fromkeys(roles)
    if isinstance(turn_timeout, Mapping):
        # every entry checked, also those of roles without a policy in this episode
        checked = {role: _seconds(s, role) for role, s in turn_timeout.items()}
        return {role: checked.get(role) for role in roles}
    if isinstance(turn_timeout, bool) or not isinstance(turn_timeout, int | float):
        raise ValueError(
            "turn_timeout must be a number of seconds >= 0, a mapping role -> seconds, "
            f"or None; got {turn_timeout!r:.80}"
        )
    return dict.fromkeys(roles, _seconds(turn_timeout, None))


def _seconds(seconds: Any, role: Any) -> float | None:
    """``seconds`` as a float (None stays None); ValueError unless a number >= 0."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
        where = "" if role is None else f" for role {role!r}"
        raise ValueError(
            f"turn_timeout{where} must be a number of seconds >= 0, got {seconds!r:.80}"
        )
    return float(seconds)
