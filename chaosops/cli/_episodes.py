"""``chaosops episodes [RUN_DIR]``: a run's finished episodes as a table,
filtered and sorted as the viewer's run page filters and sorts them."""

from __future__ import annotations

import argparse
import sys

from chaosops.viewer.index import SORTS, Filters
from chaosops.viewer.listing import episode_lines

from ._watch import open_index


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
    sys.stdout.writelines(episode_lines(shown))
    if not kept:
        sys.stderr.write(f"chaosops: none of the run's {total} episodes matches\n")
    elif len(shown) < len(kept):
        sys.stderr.write(f"chaosops: {len(shown)} of {len(kept)} matching episodes shown\n")
    return 0
