"""``chaosops replay RESULTS``: every recorded action stepped again, rewards checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chaosops.outputs import OutputError, ResultsReader
from chaosops.runs.replay import check_record, replay_records

from ._errors import CLIError, note, output_error


def _check_all(records: Any) -> int:
    """Check every record of a ``ResultsReader`` (:func:`check_record`) before any
    is replayed; returns how many there are."""
    count = 0
    for count, record in enumerate(records, start=1):
        try:
            check_record(record)
        except ValueError as exc:
            raise CLIError(f"{records.file}: line {count}: {exc}") from None
    return count


def cmd_replay(results: str) -> int:
    """``chaosops replay RESULTS``; returns the exit code (1 when anything differs)."""

    path = Path(results)
    if not path.exists():
        raise CLIError(
            f"no such results file or run folder: {results} "
            "(expected results.jsonl or a folder holding one)"
        )
    records = ResultsReader(path)  # read a line at a time, twice: checked, then replayed
    file = records.file
    try:
        count = _check_all(records)
        if not count:  # nothing to check is no check: say so rather than "every reward matches"
            raise CLIError(
                f"{file} holds no episode to replay (expected one results line per finished "
                "episode)"
            )
        if records.torn:
            note("ignored a torn last line (the run was killed while writing it)")
        episodes, steps, mismatches = replay_records(records)
    except OutputError as exc:
        raise output_error(exc) from None
    for mismatch in mismatches:
        print(mismatch.line())
    bad = len({m.episode_id for m in mismatches})
    if mismatches:
        print(
            f"replay: {bad} of {episodes} episodes differ "
            f"({len(mismatches)} mismatches over {steps} steps)"
        )
        return 1
    print(f"replay: {episodes} episodes, {steps} steps, every reward matches")
    return 0
