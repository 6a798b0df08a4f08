"""A run's episodes as plain-text lines: what ``chaosops episodes`` and
``chaosops transcript`` without ``--episode`` print."""

from __future__ import annotations

from collections.abc import Iterable

from chaosops.untrusted import one_line

from .index import EpisodeRow

HEADER = (
    f"{'episode':<44} {'id':<12} {'policy':<12} {'outcome':<12} {'mttr':>5} {'steps':>5} "
    f"{'reward':>8}\n"
)


def episode_lines(rows: Iterable[EpisodeRow]) -> list[str]:
    """The header, then a line per episode: its handle (which ``transcript
    --episode`` takes), id, policy, outcome, MTTR (``-`` unresolved), steps, reward."""
    return [HEADER, *map(episode_line, rows)]


def episode_line(row: EpisodeRow) -> str:
    outcome = row.status if row.status != "ok" else "resolved" if row.resolved else "unresolved"
    mttr = str(row.mttr) if row.mttr is not None and row.mttr >= 0 else "-"
    return (
        f"{one_line(row.handle):<44} {row.episode_id[:12]:<12} {one_line(row.policy):<12} "
        f"{outcome:<12} {mttr:>5} {row.steps:>5} {row.reward:>+8.1f}\n"
    )
