"""The run folder a server writes its episodes to, as ``chaosops run`` writes
one: results, trajectories, and summary.json when the server stops, so that
``chaosops view`` and ``watch`` follow a server as they follow a run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from chaosops.agents.llm.render import build_messages
from chaosops.agents.results import EpisodeResult
from chaosops.outputs import ResultsReader, RunOutputs, run_key
from chaosops.summary import summarise

__all__ = ["SERVED", "ServedRuns"]

SERVED = "served"
"""What the outputs call a served episode's players (their ``policy``)."""


class ServedRuns:
    """Writes each finished episode of the server's tables, as it ends, in a
    worker thread of its own: rendering an episode's trajectory takes about a
    millisecond, which the server's loop would otherwise stop for (and at once
    for every session whose episode ended together)."""

    def __init__(self, out: str | Path) -> None:
        self.outputs = RunOutputs(out)
        self._seen: Counter[str] = Counter()
        self._keys: list[str] = []
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chaosops-served")
        self.error: BaseException | None = None  # the first write that failed

    def write_soon(self, result: EpisodeResult, roles: Mapping[str, Mapping[str, Any]]) -> None:
        """:meth:`write` in the worker thread, after the episodes that ended before."""
        if self.error is None:
            self._writer.submit(self.write, result, roles).add_done_callback(self._check)

    def _check(self, done: Future[None]) -> None:
        if self.error is None and done.exception() is not None:
            self.error = done.exception()

    def open(self) -> ServedRuns:
        self.outputs.open()
        return self

    def write(self, result: EpisodeResult, roles: Mapping[str, Mapping[str, Any]]) -> None:
        """Append ``result``; ``roles`` says what played each role (policy, model)."""
        played = {role: dict(player) for role, player in roles.items()}
        first = run_key(SERVED, result.scenario, 0)
        key = run_key(SERVED, result.scenario, self._seen[first])
        self._seen[first] += 1
        self._keys.append(key)
        self.outputs.write_episode(result, policy=SERVED, key=key, render=build_messages,
                                   roles=played)  # fmt: skip

    def close(self) -> None:
        """The writes queued, summary.json of what was served, then the files
        closed; the first write that failed is raised then."""
        self._writer.shutdown(wait=True)
        if self.error is not None:
            self.outputs.close()
            raise self.error
        records = ResultsReader(self.outputs.results_path)
        self.outputs.write_summary(summarise(records, self._keys).data)
        self.outputs.close()

    def __enter__(self) -> ServedRuns:
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        self.close()
