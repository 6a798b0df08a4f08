"""The command's error type; the one-line texts are the run engine's."""

from __future__ import annotations

from chaosops.runs.errors import (
    PROG,
    RunError,
    one_line,
    os_error_in,
    os_error_line,
    output_error,
)

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
    """What a settings object said when it refused its values: pydantic's first
    message without its prefix, or the error's text."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        return str(errors()[0]["msg"]).removeprefix("Value error, ")
    return str(exc)
