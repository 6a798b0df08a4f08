"""The command's error type; the one-line texts are the run engine's."""

from __future__ import annotations

from pydantic import ValidationError

from chaosops.runs.errors import (
    PROG,
    RunError,
    one_line,
    os_error_in,
    os_error_line,
    output_error,
)
from chaosops.runs.values import refusal

__all__ = [
    "PROG",
    "CLIError",
    "RunError",
    "one_line",
    "os_error_in",
    "os_error_line",
    "output_error",
]


class CLIError(RunError):
    """A failure of the command's own input, reported as one line
    ``chaosops: error: <message>``, exit ``code``."""


def refusal_text(exc: ValueError) -> str:
    """What a settings object said when it refused its values: its validator's
    own words (:func:`chaosops.runs.values.refusal`), or the error's text."""
    said = refusal(exc) if isinstance(exc, ValidationError) else None
    return said or str(exc)
