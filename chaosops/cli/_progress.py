"""The progress bar of ``run`` and ``eval`` (rich, on stderr).

Imported by the commands when they start, so ``chaosops --help`` and the
other commands do not pay for importing rich's progress machinery.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn
from rich.text import Text

if TYPE_CHECKING:
    from rich.progress import Task

    from actors import JobResults
    from chaosops.runs.engine import Play


class _LiveText(ProgressColumn):
    """A column whose text is computed each time the bar is drawn (rich redraws it
    on a timer), so figures that change while no episode finishes stay live."""

    def __init__(self, text: Callable[[], str]) -> None:
        super().__init__()
        self._text = text

    def render(self, task: Task) -> Text:
        return Text(self._text())


class ProgressBar:
    """A rich progress bar on stderr: done/total, in flight, timeouts, errors, rate.

    ``in flight`` is the exact number of episodes running, read from the live
    counters of the batch being run (:meth:`watch`) each time the bar is drawn,
    four times a second; timeouts, errors and failed episodes are summed over
    the results handed to :meth:`advance`.
    """

    def __init__(
        self, *, enabled: bool, total: int, label: str, console: Console | None = None
    ) -> None:
        self.total = total
        self.done = 0
        self.timeouts = 0
        self.errors = 0
        self.failed = 0
        self.unread = 0  # LLM answers that did not parse (played noop)
        self.first_error: str | None = None
        self.first_unread: str | None = None
        self.late_by_role: Counter[str] = Counter()  # timed-out turns
        self.errors_by_role: Counter[str] = Counter()
        self.started = time.monotonic()
        self._results: JobResults[Any] | None = None
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            _LiveText(self.stats),
            console=console or Console(stderr=True),
            disable=not enabled,
            refresh_per_second=4,
        )
        self._task = self._progress.add_task(label, total=total)

    def watch(self, results: JobResults[Any] | None) -> None:
        """Read ``in flight`` from ``results`` (the live counters of the batch now
        running, an ``actors.JobResults``) from now on; ``None``: no batch runs."""
        self._results = results

    @property
    def in_flight(self) -> int:
        """Episodes started and not finished in the batch being watched."""
        return 0 if self._results is None else self._results.in_flight

    def stats(self) -> str:
        """The text after the bar: in flight, timeouts, errors, rate, failed if any."""
        elapsed = max(time.monotonic() - self.started, 1e-9)
        text = (
            f"in flight {self.in_flight} · timeouts {self.timeouts} · errors {self.errors}"
            f" · {self.done / elapsed:.1f} ep/s"
        )
        if self.failed:
            text += f" · failed {self.failed}"
        return text

    def __enter__(self) -> ProgressBar:
        self.started = time.monotonic()
        self._progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._progress.stop()

    def advance(self, result: Any) -> None:
        """Count one finished episode (its timeouts, errors and status)."""
        self.done += 1
        self.timeouts += int(result.timeouts)
        self.errors += int(result.errors)
        self.failed += int(result.status != "ok")
        for step in result.steps:
            role = str(getattr(step.role, "value", step.role))
            if step.timed_out:
                self.late_by_role[role] += 1
            elif step.error:
                self.errors_by_role[role] += 1
            if step.error and self.first_error is None:
                self.first_error = step.error
            if not step.timed_out and (unread := (step.info or {}).get("parse_error")):
                self.unread += 1
                self.first_unread = self.first_unread or str(unread)
        self._progress.update(self._task, advance=1)

    def trouble(self, log: str | None = None) -> list[str]:
        """Notes on the turns that played the fallback for a policy's fault or lateness:
        the per-turn events are not shown on the terminal (the JSON log, ``log``,
        has them, with tracebacks), these sum them up."""
        where = (
            "--log-json for each policy_error with its traceback" if log is None
            else "each policy_error with its traceback in the JSON log on stdout" if log == "-"
            else f"each policy_error with its traceback in {log}"
        )  # fmt: skip
        notes = []
        if self.timeouts:
            notes.append(
                f"{self.timeouts} turn(s) timed out ({_by_role(self.late_by_role)}) and played "
                "the fallback; see 'timed_out' in trajectories.jsonl, and --turn-timeout / "
                "--role-timeout"
            )
        if self.errors:
            notes.append(
                f"{self.errors} turn(s) ({_by_role(self.errors_by_role)}) played the fallback "
                "after a policy error or a failed LLM call (first: "
                f"{_cut(self.first_error)}); see 'error' in trajectories.jsonl, or {where}"
            )
        if self.unread:
            notes.append(
                f"{self.unread} answer(s) could not be read as a legal move and played noop "
                f"(first: {_cut(self.first_unread)}); see 'parse_error' in trajectories.jsonl"
            )
        return notes


def _by_role(counts: Counter[str]) -> str:
    return ", ".join(f"{role} {n}" for role, n in counts.items())


def _cut(text: str | None, size: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= size else text[: size - 3] + "..."


def trouble(plays: Sequence[Play], progress: Any) -> list[str]:
    """The closing notes on what went wrong in the turns (the progress bar's
    sums), then each model policy's own notes."""
    logs = {play.config.telemetry.log_json for play in plays}
    notes = progress.trouble(logs.pop() if len(logs) == 1 else None)
    for play in plays:
        for model in play.llms.values():
            notes.extend(model.notes())
    return notes
