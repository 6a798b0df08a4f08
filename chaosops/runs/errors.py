"""What a run reports: its error type, messages that name settings, one-line texts.

The run engine is a library: its messages name a setting by its field
(:class:`Named`), and each caller says it in its own words. Python reads
keywords (``resume=True``), the command line its flags (``--resume``):
:meth:`Message.say` takes the naming. Notes go to the :data:`NOTES`
logger, never straight to stderr.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

PROG = "chaosops"
NOTES = "chaosops.runs"
"""The logger of the engine's notes (a run resumed, a format settled): the
command line shows them on stderr; a Python caller sees them where its
logging sends INFO records."""
NOT_GIVEN: Any = type("NotGiven", (), {"__repr__": lambda self: "NOT_GIVEN"})()


@dataclass(frozen=True, slots=True)
class Named:
    """A run setting a message names: its field (the spec's keyword, the
    flag's destination) and, where the message says it, the value given."""

    field: str
    value: Any = NOT_GIVEN


Naming = Callable[[Named], str]


def as_keyword(named: Named) -> str:
    """A setting as Python names it: ``out``, ``resume=True``, ``seed_offset=5``."""
    if named.value is NOT_GIVEN:
        return named.field
    return f"{named.field}={named.value!r}"


class Message:
    """Text and :class:`Named` settings, said in a caller's words (``str``: Python's)."""

    __slots__ = ("parts",)
    parts: tuple[str | Named, ...]

    def __init__(self, *parts: str | Named | Message) -> None:
        flat: list[str | Named] = []
        for part in parts:
            flat.extend(part.parts if isinstance(part, Message) else [part])
        self.parts = tuple(flat)

    def say(self, naming: Naming = as_keyword) -> str:
        return "".join(p if isinstance(p, str) else naming(p) for p in self.parts)

    @property
    def fields(self) -> tuple[str, ...]:
        """The settings it names, the first (the one at fault) first."""
        return tuple(dict.fromkeys(p.field for p in self.parts if isinstance(p, Named)))

    def __str__(self) -> str:
        return self.say()

    def __repr__(self) -> str:
        return f"Message({self.say()!r})"


def joined(parts: Sequence[str | Named], separator: str) -> Message:
    """``parts`` one after the other, ``separator`` between them."""
    return Message(
        *(x for i, part in enumerate(parts) for x in ((separator,) if i else ()) + (part,))
    )


class RunError(Exception):
    """A run that cannot start or go on, said in one line; ``code`` is the exit
    code the command gives it (2: the user's input, 1: the system), ``field``
    the setting at fault (None: no setting's). ``str()`` names settings as
    Python keywords; ``message.say(naming)`` in other words."""

    def __init__(self, *parts: str | Named | Message, code: int = 2) -> None:
        self.message = Message(*parts)
        super().__init__(self.message.say())
        self.code = code

    @property
    def field(self) -> str | None:
        fields = self.message.fields
        return fields[0] if fields else None


OUT, RESUME = Named("out"), Named("resume", True)
"""The settings the folder refusals name: where a run writes, and resuming it."""
CONTINUE_OR_NEW = Message("pass ", RESUME, " to continue that run, or a new ", OUT, " folder")
"""What to do about a folder that holds a run."""
_ADVICE = MappingProxyType(
    {
        "not-a-folder": Message("pass ", OUT, " with a folder path"),
        "not-writable": Message("pass ", OUT, " with a writable folder"),
        "holds-a-run": CONTINUE_OR_NEW,
        "in-use": Message("wait for that run to end, or pass another ", OUT),
        "another-plan": Message("resume with the options of that run"),
    }
)
"""What to do about each kind of output folder trouble (an ``OutputError``'s reason)."""


def output_error(exc: Any, resumable: bool = True) -> RunError:
    """An ``OutputError`` as one line: what is wrong, then the setting to use
    (``resumable``: the caller can resume); exit 2 for the user's input, 1
    for the system."""
    advice = _ADVICE.get(exc.reason or "")
    if exc.reason == "holds-a-run" and not resumable:
        advice = Message("pass a new ", OUT, " folder")
    parts = (str(exc), "; ", advice) if advice else (str(exc),)
    return RunError(*parts, code=2 if exc.usage else 1)


def one_line(text: object) -> str:
    """``text`` on one line: line breaks (and the blanks around them) become ``"; "``."""
    return re.sub(r"\s*\n\s*", "; ", str(text).strip())


def note(text: str) -> None:
    """A note of the engine's, on the :data:`NOTES` logger at INFO."""
    logging.getLogger(NOTES).info(text)


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
