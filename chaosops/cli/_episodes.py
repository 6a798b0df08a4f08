"""``chaosops episodes [RUN_DIR]``: a run's finished episodes as a table,
filtered and sorted as the viewer's run page filters and sorts them."""

from __future__ import annotations

import argparse
import sys

from chaosops.untrusted import one_line
from chaosops.viewer.index import SORTS, EpisodeRow, Filters

from ._watch import open_index

HEADER = (
    f"{'episode':<44} {'id':<12} {'policy':<12} {'outcome':<12} {'mttr':>5} {'steps':>5} "
    f"{'reward':>8}\n"
)


def cmd_episodes(args: argparse.Namespace) -> int:
    """Print the episodes ``args`` keeps, in its order; a note when none is kept."""
    resolved = "yes" if args.resolved else "no" if args.unresolved else ""
    filters = Filters(failure_type=args.failure_type or "", tier=args.tier or "",
                      resolved=resolved)  # fmt: skip
    index = open_index(args.folder)
    try:
        key, reverse = SORTS[f"-{args.sort}" if args.desc else args.sort]
        kept = sorted((r for r in index.rows if filters.keeps(r)), key=key, reverse=reverse)
        total = len(index.rows)
    finally:
        index.close()
    shown = kept[: args.limit] if args.limit else kept
    sys.stdout.write(HEADER)
    sys.stdout.writelines(map(episode_line, shown))
    if not kept:
        sys.stderr.write(f"chaosops: none of the run's {total} episodes matches\n")
    elif len(shown) < len(kept):
        sys.stderr.write(f"chaosops: {len(shown)} of {len(kept)} matching episodes shown\n")
    return 0


def episode_line(row: EpisodeRow) -> str:
    outcome = row.status if row.status != "ok" else "resolved" if row.resolved else "unresolved"
    mttr = str(row.mttr) if row.mttr is not None and row.mttr >= 0 else "-"
    return (
        f"{one_line(row.handle):<44} {row.episode_id[:12]:<12} {one_line(row.policy):<12} "
        f"{outcome:<12} {mttr:>5} {row.steps:>5} {row.reward:>+8.1f}\n"
    )
