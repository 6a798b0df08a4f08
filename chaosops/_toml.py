"""Reading a TOML file given by the user (a suite, a run file): one line per problem."""

from __future__ import annotations

import re
import stat
import tomllib
from pathlib import Path
from typing import Any

MAX_TOML_BYTES = 16 * 1024 * 1024
"""The largest TOML file read (a suite of the most scenarios is well under 1 MiB)."""

_LINE_RE = re.compile(r"\(at line (\d+), column (\d+)\)")


class FileProblem(Exception):
    """A file given by the user cannot be used; the message is one line naming
    the file, where in it (an entry, a field; may be empty) and the problem."""

    def __init__(self, path: str | Path, where: str, problem: str) -> None:
        self.path = str(path)
        self.where = where
        self.problem = problem
        super().__init__(f"{self.path}: {where + ': ' if where else ''}{problem}")


def read_toml(path: Path, kind: str, error: type[FileProblem] = FileProblem) -> dict[str, Any]:
    """The TOML table of ``path``, a ``kind`` (e.g. ``"suite file"``); raises
    ``error`` for a missing or unreadable file, one that is not a regular file
    (a FIFO would block, ``/dev/zero`` never ends), is over
    :data:`MAX_TOML_BYTES`, not UTF-8, or not TOML."""
    text = _text(path, kind, error)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        detail = _LINE_RE.sub("", message).strip()
        if match := _LINE_RE.search(message):
            line, column = match.groups()
            detail = f" at line {line}, column {column}: {detail}"
        else:
            detail = f": {detail}"
        raise error(path, "", f"invalid TOML{detail}") from None
    except RecursionError:
        raise error(path, "", "invalid TOML: nested too deeply") from None


def _text(path: Path, kind: str, error: type[FileProblem]) -> str:
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise error(path, "", f"is a folder, expected a .toml {kind}")
        if not stat.S_ISREG(info.st_mode):
            raise error(path, "", f"is not a regular file, expected a .toml {kind}")
        if info.st_size > MAX_TOML_BYTES:
            raise error(
                path, "", f"{info.st_size} bytes; a {kind} is at most {MAX_TOML_BYTES} bytes"
            )
        with path.open("rb") as handle:
            # read(n) sets aside n bytes first: ask for the size stat gave
            data = handle.read(info.st_size + 1)
            if len(data) > info.st_size:  # it grew since stat
                data += handle.read(MAX_TOML_BYTES + 1 - len(data))
    except FileNotFoundError:
        dangling = " (a link to a missing file)" if path.is_symlink() else ""
        raise error(path, "", f"no such file{dangling}") from None
    except OSError as exc:
        raise error(path, "", f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_TOML_BYTES:  # grew since stat
        raise error(path, "", f"over {MAX_TOML_BYTES} bytes; a {kind} is at most that")
    try:
        return data.decode("utf-8-sig")  # a byte-order mark, as some editors write, is fine
    except UnicodeDecodeError as exc:
        raise error(
            path,
            "",
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            f"a {kind} is UTF-8 TOML",
        ) from None
