"""What one command changes while it runs, kept in one object instead of module state."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Session:
    """The state of one ``chaosops`` command, passed to what needs it.

    ``running``: the batches running now, as (cancel scope, their ``Stop``);
    ``ran``: whether batches ran (a command that failed before has no final
    metrics to serve); ``stdout_logs``: the stdout wrapper of ``--log-json -``;
    ``tracing``: what ``--otlp-endpoint`` started, for the final flush.
    """

    running: list[tuple[Any, Any]] = field(default_factory=list)
    ran: bool = False
    stdout_logs: Any = None
    tracing: Any = None

    def stop_running(self, signum: int) -> None:
        """Stop the batches running now as the signal ``signum`` would (finished
        episodes kept); called in the event loop, e.g. when stdout is closed."""
        for scope, stop in self.running:
            if stop.signum is None:
                stop.signum = signum
            scope.cancel()

    def stdout_gone(self) -> bool:
        """Whether stdout, where the JSON logs went, was closed by its reader."""
        return self.stdout_logs is not None and self.stdout_logs.gone
