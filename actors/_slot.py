"""What an episode's coordinator shares with its actors, and nothing else: the
turn open now, where replies go, and what a call is traced and counted under.
The coordinator writes it; the actors read it (and put their replies)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._metrics import EpisodeMeter


@dataclass(slots=True, eq=False)
class TurnSlot:
    """One episode's turn, as its actors see it.

    ``open_turn`` is the turn whose reply the coordinator waits for (-1 when
    none); ``replies`` the coordinator's mailbox (``put`` and ``clock``);
    ``trace_context`` the open turn's span, for the policy's own spans;
    ``meter`` counts the episode when metrics are on; ``on_asyncio`` says
    which backend runs it."""

    episode_id: str
    replies: Any
    on_asyncio: bool
    open_turn: int = -1
    trace_context: Any = None
    meter: EpisodeMeter | None = None
