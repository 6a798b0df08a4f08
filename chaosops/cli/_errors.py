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
