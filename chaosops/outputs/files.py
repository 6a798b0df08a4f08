"""Files of a run folder written whole or read a line at a time: atomic writes
(a temporary file moved into place), JSON objects, and results read as they
are iterated."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, cast

import orjson

from .records import RESULTS_FILE, ResultLine


class OutputError(Exception):
    """An output folder or file cannot be used; the message is one line saying
    what is wrong (the command adds what to do about it).

    ``usage`` is true when the cause is the user's input (a folder that already
    holds a run, a damaged results file) rather than the system; ``reason``
    names the kind of trouble, for a caller's advice: ``not-a-folder``,
    ``not-writable``, ``holds-a-run``, ``in-use``, ``another-plan``,
    ``lost-trajectories``, or None.
    """

    def __init__(self, message: str, *, usage: bool = False, reason: str | None = None) -> None:
        super().__init__(message)
        self.usage = usage
        self.reason = reason


def atomic_write_lines(path: Path, lines: Iterable[bytes]) -> None:
    """Write ``lines`` (each ending in a newline) to ``path`` via a temporary file
    and ``os.replace``, as they come: a rewrite of a large file holds one line
    at a time.

    The temporary file sits in the same folder (so the rename is atomic) and is
    created with the usual permissions (umask applies).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as handle:
            for line in lines:
                handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_write_lines`)."""
    atomic_write_lines(path, (data,))


def read_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path`` (run.json, summary.json), None when it cannot
    be read or is not one."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def being_written(results: Path) -> bool:
    """Whether a run holds ``results`` (a results.jsonl) locked: is writing it
    now. False where the file is missing or the system has no such locks."""
    try:
        import fcntl  # POSIX only
    except ImportError:  # pragma: no cover - elsewhere: no lock to ask
        return False
    try:
        handle = open(results, "rb")
    except OSError:
        return False
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:  # a file system without locks
            return False
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return False


def results_file(path: str | Path) -> Path:
    """``path`` itself, or the ``results.jsonl`` in it when it is a run folder."""
    file = Path(path)
    return file / RESULTS_FILE if file.is_dir() else file


class ResultsReader:
    """The records of a ``results.jsonl`` (or the one in a run folder), read a
    line at a time as they are iterated: memory does not grow with the file.

    After the iteration, ``torn`` says whether a torn last line (a run killed
    while writing it) was skipped. A damaged line elsewhere raises
    :class:`OutputError` naming the file and line.
    """

    def __init__(self, path: str | Path) -> None:
        self.file = results_file(path)
        self.torn = False

    def __iter__(self) -> Iterator[ResultLine]:
        try:
            handle = open(self.file, "rb")
        except FileNotFoundError:
            raise OutputError(f"no results file at {self.file}", usage=True) from None
        except OSError as exc:
            raise OutputError(f"cannot read {self.file}: {exc.strerror or exc}") from None
        with handle:
            for number, line in enumerate(handle, start=1):
                if not line.endswith(b"\n"):
                    self.torn = bool(line.strip())
                    return
                if line.strip():
                    yield self._record(line, number)

    def _record(self, line: bytes, number: int) -> ResultLine:
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise OutputError(
                f"{self.file}: line {number} is not valid JSON; expected one results record "
                "per line",
                usage=True,
            ) from None
        if not isinstance(record, dict) or "run_key" not in record or "steps" not in record:
            raise OutputError(
                f"{self.file}: line {number} is not a chaosops results record "
                "(expected an object with run_key and steps)",
                usage=True,
            )
        for field, kinds, expected in _FIGURES:
            value = record.get(field)
            if value is not None and (isinstance(value, bool) is not (bool in kinds)
                                      or not isinstance(value, kinds)):  # fmt: skip
                raise OutputError(
                    f"{self.file}: line {number}: {field}: expected {expected}, got "
                    f"{value!r:.40}; the results were edited or damaged",
                    usage=True,
                )
        return cast(ResultLine, record)  # a line of the run's own writer (checked above)


# The figures every reader computes on, by type: a line edited to hold the text
# "5" as its reward would otherwise count in a mean.
_FIGURES: tuple[tuple[str, tuple[type, ...], str], ...] = (
    ("cumulative_reward", (int, float), "a number"),
    ("resolved", (bool,), "true or false"),
    ("final_step", (int,), "a whole number"),
    ("mttr_steps", (int,), "a whole number"),
    ("wrong_fixes", (int,), "a whole number"),
    ("seed", (int,), "a whole number"),
    ("steps", (list,), "a list of steps"),
)


def read_results(path: str | Path) -> tuple[list[ResultLine], bool]:
    """Every record of a ``results.jsonl`` in a list, and whether a torn last
    line was skipped (see :class:`ResultsReader`, which streams them)."""
    reader = ResultsReader(path)
    records = list(reader)
    return records, reader.torn


def iter_lines(path: Path) -> Iterator[dict[str, Any]]:
    """Whole JSON lines of a JSONL file, read one at a time (a torn last line is skipped)."""
    with open(path, "rb") as handle:
        for line in handle:
            if line.endswith(b"\n") and line.strip():
                yield orjson.loads(line)
