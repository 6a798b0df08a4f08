"""Where text goes: rich consoles for tables, notes on stderr, JSON logs."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console

from actors import configure_logging
from chaosops.outputs import RESULTS_FILE, RUN_RECORD, SUMMARY_FILE, TRAJECTORIES_FILE
from chaosops.runs.session import Session

from ._errors import CLIError


def console_for(stream: TextIO) -> Any:
    """A rich console writing to ``stream``: as wide as the terminal or ``$COLUMNS``,
    else 160 columns."""
    width = None if stream.isatty() or os.environ.get("COLUMNS") else 160
    return _Console(file=stream, width=width, highlight=False)


class _Console(Console):
    """A console whose reader going away (``| head -2``) is a BrokenPipeError
    for the command to answer (exit 141), not rich's exit 1."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


class ReaderGoneStream:
    """``sys.stdout`` for JSON logs (``--log-json -``): when its reader goes
    away (``| head -1``), the printing stops, never the writing: what is still
    logged goes to the null device, and the run goes on to write its folder
    whole (no BrokenPipeError traceback either)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._reader_gone()
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._reader_gone()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def _reader_gone(self) -> None:
        if self.gone:
            return
        self.gone = True
        try:  # later writes, and the interpreter's last flush, go nowhere
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass


def _check_log_path(log_json: str, outputs: Sequence[Path]) -> None:
    """Refuse (exit 2) a ``--log-json`` file that is one of this command's
    ``outputs``, or an output file of a run folder: log lines appended there
    would make it unreadable to ``replay`` and ``--resume``."""

    try:
        path = Path(log_json).resolve()
        resolved = [(output, output.resolve()) for output in outputs]
    except (OSError, RuntimeError):  # a symlink loop, say: the open that follows names it
        return
    for output, where in resolved:
        if where == path:
            raise CLIError(
                f"--log-json {log_json} is this command's own output file {output}; "
                "log to another file"
            )
    if (
        path.name in (RESULTS_FILE, TRAJECTORIES_FILE, SUMMARY_FILE, RUN_RECORD)
        and path.is_file()
        and any((path.parent / name).is_file() for name in (RESULTS_FILE, RUN_RECORD))
    ):
        raise CLIError(
            f"--log-json {log_json} is an output file of the chaosops run in {path.parent}; "
            "log to another file"
        )


def configure_logs(log_json: str | None, outputs: Sequence[Path], session: Session) -> TextIO:
    """Configure JSON logs (``--log-json``); return the stream for tables and notes.

    ``outputs``: the files the command writes, which the log must not be.
    """
    session.stdout_logs = None
    if not log_json:
        # No JSON log: the runtime's per-turn warnings and errors (a policy's
        # traceback, an LLM answer that did not parse) stay off the terminal,
        # where they would bury the progress bar; the bar counts them, and
        # the command sums them up at the end (ProgressBar.trouble).

        configure_logging(level="critical")
        return sys.stdout
    if log_json != "-":
        _check_log_path(log_json, outputs)

    if log_json == "-":
        session.stdout_logs = ReaderGoneStream(sys.stdout)
        configure_logging(session.stdout_logs, pretty=False)
        return sys.stderr
    path = Path(log_json)
    above = next((p for p in path.parents if p.is_file()), None)
    if above is not None:  # mkdir would say "File exists", which points nowhere
        raise CLIError(f"--log-json {log_json}: {above} is a file, not a folder")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise CLIError(
            f"--log-json: cannot write the log file {log_json}: {exc.strerror or exc}",
            code=1,
        ) from None
    configure_logging(path, pretty=False)
    return sys.stdout
