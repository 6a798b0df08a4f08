"""An index over a run folder, kept up to date while the run writes it: a few
fields and byte offsets per episode, never the files in memory.

- ``results.jsonl`` gives one :class:`EpisodeRow` per finished episode (read
  as it grows; a torn last line waits until it is whole);
- ``trajectories.jsonl`` is indexed in a background thread: each episode's
  lines are one block, written in one go, so a block's byte span is enough
  to read its steps back;
- the run's JSON log (``log.jsonl`` in the folder, which ``chaosops run``
  writes by default) gives the episodes in flight and their turns so far; only
  its last :data:`LOG_WINDOW` bytes are read when the index opens.

A folder rewritten under the index (``--resume`` repairs it) is read again.
"""

from __future__ import annotations

import shlex
import threading
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from sys import intern
from types import MappingProxyType
from typing import Any, cast

import orjson

from chaosops.outputs import (
    LOG_FILE,
    RESULTS_FILE,
    RUN_RECORD,
    SUMMARY_FILE,
    TRAJECTORIES_FILE,
    ResultLine,
    being_written,
    parse_run_key,
    read_object,
)
from chaosops.role_figures import RoleTallies

LOG_WINDOW = 8 << 20
"""Bytes of the log read when the index opens: episodes in flight are recent."""


class NotARun(ValueError):
    """The folder holds no chaosops run (no results.jsonl, no run.json)."""


@dataclass(slots=True)
class EpisodeRow:
    """One finished episode, as the episode list shows it."""

    number: int  # its place in results.jsonl
    episode_id: str
    policy: str
    models: str  # the models that played ("" for scripted policies)
    failure_type: str
    difficulty: str
    seed: int
    max_steps: int
    sample: int  # the run key's #k: which sample of its scenario (0 without --samples)
    status: str
    resolved: bool
    reward: float
    steps: int
    mttr: int | None
    timeouts: int
    errors: int
    offset: int  # of its results line
    length: int

    @property
    def scenario(self) -> str:
        """What the same scenario is called in every run: failure/tier/seed."""
        return f"{self.failure_type}/{self.difficulty}/seed={self.seed}"

    @property
    def handle(self) -> str:
        """The scenario and the sample: ``failure/tier/seed=N#k``, one episode of a run."""
        return f"{self.scenario}#{self.sample}"

    @classmethod
    def of(cls, number: int, record: ResultLine, offset: int, length: int) -> EpisodeRow:
        roles = record.get("roles") or {}
        models = sorted({str(r["model"]) for r in roles.values() if r and r.get("model")})
        return cls(  # the strings many rows share are held once (interned)
            number=number,
            episode_id=str(record.get("episode_id")),
            policy=intern(str(record.get("policy"))),
            models=intern("+".join(models)),
            failure_type=intern(str(record.get("failure_type"))),
            difficulty=intern(str(record.get("difficulty"))),
            seed=int(record.get("seed") or 0),
            max_steps=int(record.get("max_steps") or 0),
            sample=_sample(record.get("run_key")),
            status=intern(str(record.get("status", "ok"))),
            resolved=bool(record.get("resolved")),
            reward=float(record.get("cumulative_reward") or 0.0),
            steps=len(record.get("steps") or ()),
            mttr=record.get("mttr_steps"),
            timeouts=int(record.get("timeouts") or 0),
            errors=int(record.get("errors") or 0),
            offset=offset,
            length=length,
        )


def _sample(key: Any) -> int:
    parsed = parse_run_key(key) if isinstance(key, str) else None
    return 0 if parsed is None else parsed[2]


@dataclass
class TierTally:
    """Success and reward of one (policy, tier) so far."""

    episodes: int = 0
    resolved: int = 0
    reward: float = 0.0

    def add(self, row: EpisodeRow) -> None:
        self.episodes += 1
        self.resolved += row.resolved
        self.reward += row.reward

    @property
    def mean_reward(self) -> float:
        return self.reward / self.episodes if self.episodes else 0.0


SORTS = MappingProxyType(
    {
        "finished": (lambda r: r.number, False),
        "-finished": (lambda r: r.number, True),
        "reward": (lambda r: r.reward, False),
        "-reward": (lambda r: r.reward, True),
        "steps": (lambda r: r.steps, False),
        "-steps": (lambda r: r.steps, True),
        # unresolved episodes (no MTTR) after the resolved ones, either way
        "mttr": (lambda r: (r.mttr is None or r.mttr < 0, r.mttr or 0), False),
        "-mttr": (lambda r: (r.mttr is not None and r.mttr >= 0, r.mttr or 0), True),
    }
)
"""The episode lists' orders (``-``: descending): the viewer's and ``chaosops episodes``'."""


@dataclass(frozen=True)
class Filters:
    """What an episode list keeps (a run page's, ``chaosops episodes``'); an
    empty field keeps all."""

    policy: str = ""
    model: str = ""
    failure_type: str = ""
    tier: str = ""
    resolved: str = ""  # "yes" / "no"
    timed_out: str = ""  # "yes" / "no"

    def keeps(self, row: EpisodeRow) -> bool:
        return (
            (not self.policy or row.policy == self.policy)
            and (not self.model or self.model in row.models.split("+"))
            and (not self.failure_type or row.failure_type == self.failure_type)
            and (not self.tier or row.difficulty == self.tier)
            and (not self.resolved or row.resolved == (self.resolved == "yes"))
            and (not self.timed_out or (row.timeouts > 0) == (self.timed_out == "yes"))
        )


FILTERED = tuple(f.name for f in fields(Filters))
"""The fields a list filters on, as a page's query names them."""


@dataclass
class InFlight:
    """An episode started (the log says) and not finished yet."""

    episode_id: str
    fields: dict[str, Any]
    turns: list[dict[str, Any]] = field(default_factory=list)


class _Tail:
    """The new whole lines of a file that grows, from where the last read stopped."""

    def __init__(self, path: Path, start: int = 0) -> None:
        self.path = path
        self.offset = start
        self._inode: int | None = None
        self.replaced = False  # the file was rewritten (or cut) since the last read

    def lines(self, chunk: int = 8 << 20) -> Iterator[tuple[int, bytes]]:
        """``(offset, line)`` of each whole line written since the last call."""
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return
        if self._inode not in (None, info.st_ino) or info.st_size < self.offset:
            self.replaced = True
            return
        self._inode = info.st_ino
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            pending = b""  # the start of a line longer than what was read so far
            while self.offset + len(pending) < info.st_size:
                data = pending + handle.read(min(chunk, info.st_size - self.offset - len(pending)))
                end = data.rfind(b"\n") + 1
                position = 0
                while position < end:
                    stop = data.find(b"\n", position, end) + 1
                    yield self.offset + position, data[position:stop]
                    position = stop
                self.offset += end
                pending = data[end:]


class RunIndex:
    """The index of one run folder (see the module docstring). :meth:`refresh`
    reads what was written since; it is cheap when nothing was."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise NotARun(f"{self.folder}: no such run folder")
        if not (self.folder / RESULTS_FILE).exists() and not (self.folder / RUN_RECORD).exists():
            raise NotARun(
                f"{self.folder}: not a chaosops run folder (no {RESULTS_FILE}, no {RUN_RECORD})"
            )
        self.name = self.folder.name
        self._run_options: dict[str, Any] = {}
        self._lock = threading.RLock()
        self._reset()
        self.refresh()

    def _reset(self) -> None:
        self.rows: list[EpisodeRow] = []
        self.by_id: dict[str, int] = {}
        self.by_scenario: dict[str, list[int]] = {}
        self.roles = RoleTallies()
        self.tiers: dict[tuple[str, str], TierTally] = {}
        self.in_flight: dict[str, InFlight] = {}
        self._results = _Tail(self.folder / RESULTS_FILE)
        self._blocks = _Blocks(self.folder / TRAJECTORIES_FILE, self.by_id)
        log = self.folder / LOG_FILE
        start = max(0, log.stat().st_size - LOG_WINDOW) if log.exists() else 0
        self._log = _Tail(log, start)
        self._log_partial = start > 0  # the window starts mid-line: skip to the next

    # -- reading

    def refresh(self) -> None:
        """Read what the run wrote since the last call."""
        with self._lock:
            for offset, line in self._results.lines():
                self._add_result(offset, line)
            if self._results.replaced:
                self._blocks.stop()
                self._reset()
                return self.refresh()
            self._read_log()
            if self.in_flight and not self.writing():  # killed: nothing is in flight any more
                self.in_flight.clear()
            self._blocks.start()

    def _add_result(self, offset: int, line: bytes) -> None:
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            return  # not a line of ours: replay and resume name it
        if not isinstance(record, dict) or "run_key" not in record:
            return
        record = cast(ResultLine, record)  # a results line: checked above
        row = EpisodeRow.of(len(self.rows), record, offset, len(line))
        self.rows.append(row)
        self.by_id[row.episode_id] = row.number
        self.by_scenario.setdefault(row.scenario, []).append(row.number)
        self.roles.add(record)
        self.tiers.setdefault((row.policy, row.difficulty), TierTally()).add(row)
        self.in_flight.pop(row.episode_id, None)

    def _read_log(self) -> None:
        for _, line in self._log.lines():
            if self._log_partial:
                self._log_partial = False
                continue
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            episode = event.get("episode_id") if isinstance(event, dict) else None
            if not isinstance(episode, str):
                continue
            kind = event.get("event")
            if kind == "episode_started" and episode not in self.by_id:
                self.in_flight[episode] = InFlight(episode, event)
            elif kind == "turn" and episode in self.in_flight:
                self.in_flight[episode].turns.append(event)
            elif kind == "episode_finished":
                self.in_flight.pop(episode, None)

    # -- what the pages ask

    def run_options(self) -> dict[str, Any]:
        """The run's run.json: written once when it starts, so read once found."""
        if not self._run_options:
            self._run_options = read_object(self.folder / RUN_RECORD) or {}
        return self._run_options

    def summary(self) -> dict[str, Any]:
        return read_object(self.folder / SUMMARY_FILE) or {}

    def planned(self) -> int | None:
        planned = self.run_options().get("planned")
        return planned if isinstance(planned, int) else None

    def finished(self) -> bool:
        """Whether the run has ended: its summary written after its last result."""
        summary, results = self.folder / SUMMARY_FILE, self.folder / RESULTS_FILE
        try:
            if summary.stat().st_mtime_ns < results.stat().st_mtime_ns:
                return False
        except FileNotFoundError:
            return False
        return self.summary().get("episodes") == len(self.rows)

    def status(self) -> str:
        """``finished``; ``running`` (a process writes the folder); or ``stopped``:
        none does (killed, or stopped before its end), and ``--resume`` goes on."""
        if self.finished():
            return "finished"
        return "running" if self.writing() else "stopped"

    def resume_command(self) -> str:
        """The command that goes on with the run, quoted as cli's own is."""
        return f"chaosops run --resume --out {shlex.quote(str(self.folder))}"

    def writing(self) -> bool:
        """Whether a run is writing the folder now (it holds its results locked)."""
        return being_written(self.folder / RESULTS_FILE)

    def over(self) -> bool:
        """Whether nothing more will come: the run finished, or no run writes the
        folder (one interrupted, or one that has not started writing)."""
        return self.finished() or ((self.folder / RESULTS_FILE).exists() and not self.writing())

    def row(self, episode_id: str) -> EpisodeRow | None:
        number = self.by_id.get(episode_id)
        return None if number is None else self.rows[number]

    def record(self, row: EpisodeRow) -> dict[str, Any]:
        """The whole results record of ``row``, read from the file."""
        with open(self.folder / RESULTS_FILE, "rb") as handle:
            handle.seek(row.offset)
            return orjson.loads(handle.read(row.length))

    def trajectory(self, episode_id: str, wait_s: float = 5.0) -> list[dict[str, Any]]:
        """The trajectory lines of a finished episode, in step order ([] if none)."""
        span = self._blocks.span(episode_id, wait_s)
        if span is None:
            return []
        with open(self.folder / TRAJECTORIES_FILE, "rb") as handle:
            handle.seek(span[0])
            data = handle.read(span[1] - span[0])
        steps = [orjson.loads(line) for line in data.splitlines() if line.strip()]
        return sorted(steps, key=lambda s: s.get("step", 0))

    def close(self) -> None:
        self._blocks.stop()


class _Blocks:
    """Byte spans of each episode's block of trajectory lines, found by a
    background thread that reads the file as it grows. A span is kept by the
    episode's row number (8 bytes), or by its id until its results line is
    indexed."""

    def __init__(self, path: Path, rows: dict[str, int]) -> None:
        self.path = path
        self._rows = rows  # the index's episode id -> row number
        self._spans = array("q")  # by row number: start << 32 | length, -1 unknown
        self._waiting: dict[str, int] = {}  # blocks of episodes not indexed yet
        self._tail = _Tail(path)
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._current: tuple[str, int, int] | None = None  # the block being read

    def start(self) -> None:
        """Read what was added (in the thread, unless it is still reading)."""
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._read, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopped = True

    def _read(self) -> None:
        for offset, line in self._tail.lines():
            if self._stopped:
                return
            self._add(offset, line)
        self._close_block()
        with self._changed:
            self._changed.notify_all()

    def _add(self, offset: int, line: bytes) -> None:
        start = line.find(b'"episode_id":"')
        episode = None
        if start != -1:
            start += len(b'"episode_id":"')
            episode = line[start : line.find(b'"', start)].decode(errors="replace")
        current = self._current
        if current is not None and current[0] == episode:
            self._current = (episode, current[1], offset + len(line))
            return
        self._close_block()
        if episode is not None:
            self._current = (episode, offset, offset + len(line))

    def _close_block(self) -> None:
        if self._current is None:
            return
        episode, start, end = self._current
        self._current = None
        packed = start << 32 | (end - start)
        number = self._rows.get(episode)
        if number is None:
            self._waiting[episode] = packed
            return
        if len(self._spans) <= number:
            self._spans.extend([-1] * (number + 1 - len(self._spans)))
        self._spans[number] = packed

    def _packed(self, episode_id: str) -> int | None:
        number = self._rows.get(episode_id)
        if number is not None and number < len(self._spans) and self._spans[number] >= 0:
            return self._spans[number]
        return self._waiting.get(episode_id)

    def span(self, episode_id: str, wait_s: float) -> tuple[int, int] | None:
        """The span of ``episode_id``'s block, waiting for the reader to reach it."""
        with self._changed:
            self._changed.wait_for(
                lambda: self._packed(episode_id) is not None or not self._busy(), timeout=wait_s
            )
        packed = self._packed(episode_id)
        return None if packed is None else (packed >> 32, (packed >> 32) + (packed & 0xFFFFFFFF))

    def _busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
