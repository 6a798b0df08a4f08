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
        table = {role: turn_timeout.get(role) for role in roles}
    elif isinstance(turn_timeout, bool) or not isinstance(turn_timeout, int | float):
        raise ValueError(
            "turn_timeout must be a number of seconds >= 0, a mapping role -> seconds, "
            f"or None; got {turn_timeout!r:.80}"
        )
    else:
        table = dict.fromkeys(roles, turn_timeout)
    for role, seconds in table.items():
        if seconds is None:
            continue
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
            where = f" for role {role!r}" if isinstance(turn_timeout, Mapping) else ""
            raise ValueError(
                f"turn_timeout{where} must be a number of seconds >= 0, got {seconds!r:.80}"
            )
        table[role] = float(seconds)
    return table
