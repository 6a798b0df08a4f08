"""The run folder a server writes its episodes to, through the run engine's
:class:`~chaosops.runs.folder.RunFolder` as ``chaosops run`` writes one:
run.json when it starts, results and trajectories, and summary.json when the
server stops, so that ``chaosops view`` and ``watch`` follow a server as they
follow a run."""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from chaosops.agents.llm.render import build_messages
from chaosops.env.results import EpisodeResult
from chaosops.outputs import ResultsReader, run_key
from chaosops.runs.folder import RunFolder
from chaosops.summary import summarise

__all__ = ["SERVED", "ServedRuns"]

# The writer's share of the server loop's time: a tenth, and a tenth more for
# every 64 episodes waiting (at most a half), so that the sessions keep the
# loop and the episodes waiting stay few.
_SHARE, _BACKLOG, _MAX_SHARE = 0.1, 64, 0.5

STATUS_EVERY_S = 5.0
"""How often a server says how many episodes it served, while it serves some."""

SERVED = "served"
"""What the outputs call a served episode's players (their ``policy``)."""


class ServedRuns:
    """Writes each finished episode of the server's tables, in the order they
    ended, from a task of the server's loop that takes a share of the loop's
    time. Rendering an episode's trajectory takes a few hundred
    microseconds: written where it ended, every episode that ended together
    would stop the loop at once; written in a thread, the thread would take
    the interpreter from the loop in slices of milliseconds."""

    def __init__(
        self, out: str | Path, announce: Callable[[str], None] | None = None,
        record: Mapping[str, Any] | None = None,
    ) -> None:  # fmt: skip
        self.folder = RunFolder(out)
        self.record = record  # its run.json (see chaosops.runs.folder.served_record)
        # told a line every STATUS_EVERY_S while episodes are written, and the total
        # at the end: a line an episode would flood a reader, or fill a pipe nobody reads
        self.announce = announce
        self.served = self.resolved = 0
        self._said = time.monotonic()
        self._seen: Counter[str] = Counter()
        self._keys: list[str] = []
        self._queue: deque[tuple[EpisodeResult, Mapping[str, Mapping[str, Any]]]] = deque()
        self._ready: asyncio.Event | None = None  # set when the queue has work
        self._writer: asyncio.Task[None] | None = None
        self.error: BaseException | None = None  # the first write that failed

    def write_soon(self, result: EpisodeResult, roles: Mapping[str, Mapping[str, Any]]) -> None:
        """:meth:`write` soon, after the episodes that ended before (on the loop)."""
        if self.error is not None:
            return
        self._queue.append((result, roles))
        if self._writer is None:
            self._ready = asyncio.Event()
            self._writer = asyncio.get_running_loop().create_task(self._write_queued())
        assert self._ready is not None
        self._ready.set()

    async def _write_queued(self) -> None:
        """Write while there is work, taking a share of the loop's time (at
        least one episode a pass): the sessions get the rest."""
        assert self._ready is not None
        clock = time.perf_counter
        while True:
            await self._ready.wait()
            self._ready.clear()
            slice_end = clock()
            while self._queue and self.error is None:
                await asyncio.sleep(0)  # the sessions' work first
                started = clock()
                share = min(_SHARE * (1 + len(self._queue) / _BACKLOG), _MAX_SHARE)
                budget = (started - slice_end) * share / (1 - share)
                self._write_next()
                while self._queue and self.error is None and clock() - started < budget:
                    self._write_next()
                slice_end = clock()

    def _write_next(self) -> None:
        try:
            self.write(*self._queue.popleft())
        except Exception as exc:  # kept for close(), which raises it
            self.error = exc

    def open(self) -> ServedRuns:
        """Open the folder, which must hold no run (a server starts afresh), and
        write its run.json."""
        self.folder.refuse_a_run("give chaosops serve a new --out folder")
        self.folder.open()
        if self.record is not None:
            self.folder.write_record(self.record)
        return self

    def write(self, result: EpisodeResult, roles: Mapping[str, Mapping[str, Any]]) -> None:
        """Append ``result``; ``roles`` says what played each role (policy, model)."""
        played = {role: dict(player) for role, player in roles.items()}
        first = run_key(SERVED, result.scenario, 0)
        key = run_key(SERVED, result.scenario, self._seen[first])
        self._seen[first] += 1
        self._keys.append(key)
        self.folder.write_episode(result, policy=SERVED, key=key, render=build_messages,
                                  roles=played)  # fmt: skip
        self.served += 1
        self.resolved += bool(result.resolved)
        if self.announce is not None and time.monotonic() - self._said >= STATUS_EVERY_S:
            self._said = time.monotonic()
            outcome = "resolved" if result.resolved else "unresolved"
            self.announce(
                f"{self.served} episode(s) served, {self.resolved} resolved; the last, "
                f"{key.split('/', 1)[1]}: {outcome}, reward {result.cumulative_reward:+.1f}"
            )

    def close(self) -> None:
        """The writes queued, summary.json of what was served, then the files
        closed; the first write that failed is raised then."""
        # The loop has stopped (its tasks were cancelled): what it left is written here.
        self._writer = None
        while self._queue and self.error is None:
            self._write_next()
        if self.error is not None:
            self.folder.close()
            raise self.error
        records = ResultsReader(self.folder.results_path)
        self.folder.write_summary(summarise(records, self._keys).data)
        self.folder.close()
        if self.announce is not None:
            self.announce(
                f"served {self.served} episode(s), {self.resolved} resolved; wrote "
                f"{self.folder.results_path}, {self.folder.summary_path}"
            )

    def __enter__(self) -> ServedRuns:
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        self.close()
