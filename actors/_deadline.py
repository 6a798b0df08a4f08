"""Per-role turn deadlines."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._types import TurnTimeout


def timeouts_by_role(turn_timeout: TurnTimeout, roles: Iterable[Any]) -> dict[Any, float | None]:
    """Seconds per role (None: no deadline) from a ``turn_timeout`` argument.

    Validated once per episode so the per-turn path is a dict lookup.
    """
    if turn_timeout is None:
        return dict.fromkeys(roles)
    if isinstance(turn_timeout, Mapping):
        table = {role: turn_timeout.get(role) for role in roles}
    else:
        table = dict.fromkeys(roles, turn_timeout)
    for role, seconds in table.items():
        if seconds is None:
            continue
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise ValueError(
                f"turn_timeout for role {role!r} must be a number of seconds >= 0, got {seconds!r}"
            )
        table[role] = float(seconds)
    return table
