"""Making a run folder consistent again after a killed run (``--resume``): a torn
last results line goes, of a run key recorded twice the first line is kept, an
episode whose trajectory lost a line is dropped to run again, and trajectory
lines of episodes without a results line go. Both files are read a line at a
time and rewritten only when something goes; what is held is a few bytes per
planned episode."""

from __future__ import annotations

import os
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .files import OutputError, ResultsReader, atomic_write_lines
from .records import dumps_line


@dataclass
class ResumeState:
    """What :meth:`RunOutputs.open` found in the folder."""

    done: bytearray = field(default_factory=bytearray)  # 1 at each plan index recorded
    records: int = 0
    torn_results_line: bool = False
    dropped_trajectory_lines: int = 0
    duplicate_results: int = 0  # later lines of a run key already recorded, dropped
    damaged_episodes: int = 0  # finished episodes with a trajectory line lost, to run again


def _trajectory_record(line: bytes) -> dict[str, Any] | None:
    """A whole trajectory line's record (with episode_id and step), else None."""
    if not line.endswith(b"\n"):
        return None  # torn
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(record, dict) or "episode_id" not in record or "step" not in record:
        return None
    return record


def _line_identity(line: bytes, keys: Any) -> tuple[int | None, Any, Any]:
    """(plan index, episode id, step) of a trajectory line; index None for a
    line that does not read or names no planned episode."""
    record = _trajectory_record(line)
    if record is None or not isinstance(record.get("run_key"), str):
        return None, None, None
    return keys.position(record["run_key"]), record["episode_id"], record["step"]


def _owner_tag(episode: Any) -> int:
    """A 32-bit hash of an episode id, plus one (0 stands for no episode yet)."""
    return zlib.crc32(str(episode).encode()) + 1


class _Tally:
    """Per planned episode, the trajectory lines read in step order (1, 2, ...)
    and whose they are (:func:`_owner_tag`; -1 when two episodes wrote lines
    under one run key): arrays of a few bytes per planned episode."""

    def __init__(self, keys: Any, path: Path | None = None) -> None:
        self.lines = array("I", bytes(4 * len(keys)))
        self.owner = array("q", bytes(8 * len(keys)))
        self.lines_read = 0
        if path is not None and path.exists():
            with open(path, "rb") as handle:
                for line in handle:
                    self.lines_read += 1
                    index, episode, step = _line_identity(line, keys)
                    if index is not None:
                        self.add(index, episode, step)

    def add(self, index: int, episode: Any, step: Any) -> bool:
        """Count a line of ``episode``'s when it is the next step of its owner's."""
        tag = _owner_tag(episode)
        if self.owner[index] == 0:
            self.owner[index] = tag
        elif self.owner[index] != tag:
            self.owner[index] = -1
            return False
        if step != self.lines[index] + 1:
            return False
        self.lines[index] += 1
        return True

    def owns(self, index: int, episode: Any) -> bool:
        return self.owner[index] == _owner_tag(episode)

    def complete(self, index: int, episode: Any, steps: int) -> bool:
        """Whether ``episode`` alone wrote lines under ``index``: ``steps`` of them."""
        if steps == 0:  # an episode that failed before its first step wrote none
            return self.owner[index] == 0
        return self.owns(index, episode) and self.lines[index] >= steps

    def lines_of(self, done: bytearray) -> int:
        """The lines counted for the plan indices in ``done``."""
        return sum(n for n, kept in zip(self.lines, done, strict=True) if kept)


def recover(results_path: Path, trajectories_path: Path, keys: Any) -> tuple[ResumeState, bool]:
    """The folder made consistent after a killed run: what is done (a flag per
    planned episode of ``keys``), what went, and whether ``results.jsonl`` was
    rewritten (a handle open on it before writes to a file no longer there)."""
    state = ResumeState()
    _refuse_lost_trajectories(results_path, trajectories_path)
    state.torn_results_line = _truncate_torn(results_path)
    tally = _Tally(keys, trajectories_path)
    done = bytearray(len(keys))
    dropped_results = 0
    if results_path.exists():
        for record in ResultsReader(results_path):
            index = _planned(keys, record["run_key"], results_path)
            if done[index]:
                state.duplicate_results += 1
            elif not tally.complete(index, record.get("episode_id"), len(record["steps"])):
                state.damaged_episodes += 1
            else:
                done[index] = 1
                continue
            dropped_results += 1
    state.done = done
    state.records = done.count(1)
    # trajectories first: results lines are what a failed rewrite must not lose
    if dropped_results or tally.lines_read > tally.lines_of(done):
        state.dropped_trajectory_lines = _rewrite_trajectories(trajectories_path, keys, tally, done)
    if dropped_results:
        _rewrite_results(results_path, keys, done)
    return state, bool(dropped_results)


def _refuse_lost_trajectories(results_path: Path, trajectories_path: Path) -> None:
    """A results file with episodes beside a missing or empty trajectories file:
    no run leaves that (a turn's lines are written before its results line), so
    resuming would drop every result to play it again. Refused, nothing touched."""
    if not _size(results_path):
        return
    lost = "missing" if not trajectories_path.exists() else "empty" if not _size(
        trajectories_path) else None  # fmt: skip
    if lost is None:
        return
    episodes = sum(1 for line in results_path.read_bytes().splitlines() if line.strip())
    raise OutputError(
        f"cannot resume from {results_path.parent}: {trajectories_path.name} is {lost} while "
        f"{results_path.name} records {episodes} episode(s); resuming would drop them all "
        f"and play them again: restore {trajectories_path.name}, or remove "
        f"{results_path.name} too to start over",
        usage=True,
        reason="lost-trajectories",
    )


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _planned(keys: Any, key: str, results_path: Path) -> int:
    index = keys.position(key)
    if index is None:
        raise OutputError(
            f"{results_path} records episode {key}, which the plan does not hold",
            usage=True,
            reason="another-plan",
        )
    return index


def _truncate_torn(results_path: Path) -> bool:
    """Cut a torn last line (one killed while written) off results.jsonl: the
    bytes after the last newline, found reading backwards a block at a time.
    Whether the line cut held anything."""
    if not results_path.exists():
        return False
    with open(results_path, "rb") as handle:
        size = end = handle.seek(0, os.SEEK_END)
        while end > 0:
            start = max(0, end - (1 << 16))
            handle.seek(start)
            newline = handle.read(end - start).rfind(b"\n")
            if newline != -1:
                end = start + newline + 1
                break
            end = start
        handle.seek(end)
        torn = handle.read(size - end)
    if torn:  # the episode it described is run again
        os.truncate(results_path, end)
    return bool(torn.strip())


def _rewrite_results(results_path: Path, keys: Any, done: bytearray) -> None:
    """results.jsonl with the first line of each plan index in ``done`` only."""
    written = bytearray(len(done))

    def lines() -> Iterator[bytes]:
        for record in ResultsReader(results_path):
            index = keys.position(record["run_key"])
            if index is not None and done[index] and not written[index]:
                written[index] = 1
                yield dumps_line(record)

    atomic_write_lines(results_path, lines())


def _rewrite_trajectories(
    trajectories_path: Path, keys: Any, tally: _Tally, done: bytearray
) -> int:
    """trajectories.jsonl with the lines of the episodes in ``done`` only (each
    step once, in order); returns how many lines went."""
    kept = _Tally(keys)
    dropped = 0

    def lines() -> Iterator[bytes]:
        nonlocal dropped
        with open(trajectories_path, "rb") as handle:
            for line in handle:
                index, episode, step = _line_identity(line, keys)
                if index is None or not done[index] or not tally.owns(index, episode):
                    dropped += 1
                elif kept.add(index, episode, step):
                    yield line
                else:
                    dropped += 1

    atomic_write_lines(trajectories_path, lines())
    return dropped
