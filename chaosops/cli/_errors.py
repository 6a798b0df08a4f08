"""The command's error type and notes, and the engine's messages in its words:
a setting the engine names (:class:`~chaosops.runs.errors.Named`) is said as
its flag."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import ValidationError

from chaosops import untrusted
from chaosops.runs.errors import (
    NOT_GIVEN,
    NOTES,
    PROG,
    Message,
    Named,
    RunError,
    one_line,
    os_error_in,
    os_error_line,
    output_error,
)
from chaosops.runs.values import refusal

from ._flags import BY_FIELD, flag, flag_named

__all__ = [
    "PROG",
    "CLIError",
    "RunError",
    "one_line",
    "os_error_in",
    "os_error_line",
    "output_error",
]


def as_flag(named: Named) -> str:
    """A setting as the command line names it: ``--out``, ``--resume``, ``--seed-offset 5``."""
    option = BY_FIELD.get(named.field)
    said = flag(option) if option else flag_named(named.field)
    if named.value is NOT_GIVEN or (option is not None and option.switch):
        return said
    return f"{said} {named.value}"


def said(error: RunError | Message) -> str:
    """An error or a message of the engine's, its settings named by their flags."""
    return (error.message if isinstance(error, RunError) else error).say(as_flag)


def note(text: str) -> None:
    """One line ``chaosops: <text>`` on stderr (a server's or a model's words in
    it shown as text, a line break in them as ``\\n``)."""
    sys.stderr.write(f"{PROG}: {untrusted.one_line(text)}\n")
    sys.stderr.flush()


class _Notes(logging.Handler):
    """The engine's notes (its :data:`~chaosops.runs.errors.NOTES` logger) as the command's."""

    def emit(self, record: logging.LogRecord) -> None:
        note(record.getMessage())


@contextmanager
def notes_on_stderr() -> Iterator[None]:
    """The engine's notes on stderr while the command runs."""
    logger, handler = logging.getLogger(NOTES), _Notes()
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # said once, not again by a root handler of the caller's
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


class CLIError(RunError):
    """A failure of the command's own input, reported as one line
    ``chaosops: error: <message>``, exit ``code``."""


def refusal_text(exc: ValueError) -> str:
    """What a settings object said when it refused its values: its validator's
    own words (:func:`chaosops.runs.values.refusal`), or the error's text."""
    said = refusal(exc) if isinstance(exc, ValidationError) else None
    return said or str(exc)
