"""The command's name, its error type and one-line error text."""

from __future__ import annotations

import re

PROG = "chaosops"


class CLIError(Exception):
    """A failure reported as one line ``chaosops: error: <message>``, exit ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def one_line(text: object) -> str:
    """``text`` on one line: line breaks (and the blanks around them) become ``"; "``."""
    return re.sub(r"\s*\n\s*", "; ", str(text).strip())


def os_error_in(exc: BaseException) -> OSError | None:
    """``exc`` if it is an :class:`OSError`; for an exception group (a batch's
    task group) made of nothing but OSErrors, the first of them; else None."""
    if isinstance(exc, OSError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        matched, rest = exc.split(OSError)
        if matched is not None and rest is None:
            while isinstance(matched, BaseExceptionGroup):
                matched = matched.exceptions[0]
            return matched if isinstance(matched, OSError) else None
    return None


def os_error_line(error: OSError) -> str:
    """``"<file>: <reason>"`` for a system error (the file when it names one)."""
    where = f"{error.filename}: " if error.filename is not None else ""
    return f"{where}{one_line(error.strerror or error)}"
