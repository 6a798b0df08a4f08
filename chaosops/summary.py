"""A run folder's summary (``summary.json``): the totals, the evaluation rows
with their 95% intervals, each role's turn figures and, with samples, pass@k.

Derived from the results records only, read once (a :class:`ResultsReader`
reads a file a line at a time, so memory stays flat), so a resumed run ends
with the same summary as an uninterrupted one (the turn latencies aside).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaosops.evaluation import evaluate_records, ran_to_end, resolved, rows_to_json
from chaosops.outputs import ListedKeys, ResultLine
from chaosops.role_figures import RoleTallies
from chaosops.samples import sample_rows

__all__ = ["Summary", "summarise"]


@dataclass
class Summary:
    """A folder's summary: ``data`` (summary.json's content), and its rows, role
    figures and sample rows as objects (for the tables)."""

    data: dict[str, Any]
    rows: list[Any]
    roles: list[Any]
    samples: list[Any] = dataclasses.field(default_factory=list)  # with samples > 1


_SAMPLED = ("run_key", "policy", "difficulty", "resolved", "status", "cumulative_reward")


def summarise(
    records: Iterable[ResultLine],
    planned: Sequence[str],
    *,
    samples: int = 1,
    played: Mapping[str, Any] | None = None,
) -> Summary:
    """The summary of ``records`` against the ``planned`` run keys; ``samples``
    (each scenario's repeats) adds pass@k, ``played`` (what played each role)
    goes in as it is."""
    totals = {"episodes": 0, "resolved": 0, "failed": 0, "timeouts": 0, "errors": 0}
    sampled: list[dict[str, Any]] = []  # what pass@k needs of each record
    keys = planned if hasattr(planned, "position") else ListedKeys(planned)
    done = bytearray(len(keys))  # a flag per planned episode
    tallies = RoleTallies()

    def counted() -> Iterator[ResultLine]:
        for record in records:
            if (index := keys.position(record["run_key"])) is not None:
                done[index] = 1
            tallies.add(record)
            totals["episodes"] += 1
            totals["resolved"] += resolved(record)  # the table's rule
            totals["failed"] += not ran_to_end(record)
            totals["timeouts"] += int(record.get("timeouts", 0))
            totals["errors"] += int(record.get("errors", 0))
            if samples > 1:
                sampled.append({name: record.get(name) for name in _SAMPLED})
            yield record

    rows = evaluate_records(counted())
    roles = tallies.figures()
    by_sample = sample_rows(sampled, samples) if samples > 1 else []
    missing = len(done) - done.count(1)
    data = {
        **totals,
        "planned": len(planned),
        "missing": missing,
        "complete": not missing,
        "rows": rows_to_json(rows),
        "roles": [figures.to_json() for figures in roles],
        **({"samples": [row.to_json() for row in by_sample]} if by_sample else {}),
        **(played or {}),
    }
    return Summary(data, rows, roles, by_sample)
