"""The progress bar of ``run`` and ``eval`` (rich, on stderr)."""

from __future__ import annotations

import time
from typing import Any


class ProgressBar:
    """A rich progress bar on stderr: done/total, in flight, timeouts, errors, rate."""

    def __init__(self, *, enabled: bool, total: int, concurrency: int, label: str) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.total = total
        self.concurrency = concurrency
        self.done = 0
        self.timeouts = 0
        self.errors = 0
        self.failed = 0
        self.started = time.monotonic()
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[stats]}"),
            console=Console(stderr=True),
            disable=not enabled,
            refresh_per_second=4,
        )
        self._task = self._progress.add_task(label, total=total, stats=self._stats())

    def _stats(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        in_flight = min(self.concurrency, self.total - self.done)
        text = (
            f"in flight {in_flight} · timeouts {self.timeouts} · errors {self.errors}"
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
        self._progress.update(self._task, stats=self._stats())
        self._progress.stop()

    def advance(self, result: Any) -> None:
        self.done += 1
        self.timeouts += int(result.timeouts)
        self.errors += int(result.errors)
        self.failed += int(result.status != "ok")
        self._progress.update(self._task, advance=1, stats=self._stats())
