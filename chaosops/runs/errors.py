"""What a run reports: its error type, one-line texts, and notes on stderr."""

from __future__ import annotations

import re
import sys
from types import MappingProxyType
from typing import Any

from chaosops import untrusted

PROG = "chaosops"


class RunError(Exception):
    """A run that cannot start or go on, said in one line; ``code`` is the exit
    code the command gives it (2: the user's input, 1: the system)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


_ADVICE = MappingProxyType(
    {
        "not-a-folder": "pass --out with a folder path",
        "not-writable": "pass --out with a writable folder",
        "holds-a-run": "pass --resume to continue that run, or a new --out folder",
        "in-use": "wait for that run to end, or pass another --out",
        "another-plan": "resume with the options of that run",
    }
)
"""What to do about each kind of output folder trouble (an ``OutputError``'s reason)."""


def output_error(exc: Any, resumable: bool = True) -> RunError:
    """An ``OutputError`` as one line: what is wrong, then the option to use
    (``resumable``: the command has ``--resume``); exit 2 for the user's
    input, 1 for the system."""
    advice = _ADVICE.get(exc.reason or "")
    if exc.reason == "holds-a-run" and not resumable:
        advice = "pass a new --out folder"
    message = f"{exc}; {advice}" if advice else str(exc)
    return RunError(message, code=2 if exc.usage else 1)


def one_line(text: object) -> str:
    """``text`` on one line: line breaks (and the blanks around them) become ``"; "``."""
    return re.sub(r"\s*\n\s*", "; ", str(text).strip())


def note(text: str) -> None:
    """One line ``chaosops: <text>`` on stderr (a server's or a model's words in
    it shown as text, a line break in them as ``\\n``)."""
    sys.stderr.write(f"{PROG}: {untrusted.one_line(text)}\n")
    sys.stderr.flush()


def os_error_in(exc: BaseException) -> OSError | None:
    """``exc`` if it is an :class:`OSError`; for an exception group (a batch's
    task group) made of nothing but OSErrors, the first of them; else None."""
    if isinstance(exc, OSError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        matched, rest = exc.split(OSError)
        if matched is not None and rest is None:
            first = first_of(matched)
            return first if isinstance(first, OSError) else None
    return None


def first_of(group: BaseExceptionGroup[Any]) -> BaseException:
    """The first exception of ``group``, through the groups nested in it."""
    first: BaseException = group
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first


def os_error_line(error: OSError) -> str:
    """``"<file>: <reason>"`` for a system error (the file when it names one)."""
    where = f"{error.filename}: " if error.filename is not None else ""
    return f"{where}{one_line(error.strerror or error)}"
