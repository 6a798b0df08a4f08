"""Text that came from outside (a model's answer, a server's body, a run file's
name) made safe to show: on a terminal it must not move the cursor, change
colours or clear the screen, and rich must not read it as markup.

Outputs on disk keep such text as it was (JSON escapes it); only what is shown
to a person goes through here.
"""

from __future__ import annotations

import re

from rich.text import Text

__all__ = ["one_line", "plain", "printable"]

# C0 controls but tab and line feed, DEL, and C1 controls (ANSI escapes start
# with ESC, \x1b, or with CSI, \x9b); and the bidirectional controls, which
# reorder what a line shows (U+202E makes "exe.txt" read "txt.exe")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: object) -> str:
    """``text`` with each control character written as a visible escape
    (``\\x1b``, ``\\u202e``)."""
    return _CONTROL.sub(_escape, str(text))


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def one_line(text: object) -> str:
    """:func:`printable`, line breaks written as ``\\n`` too: for a line of
    its own (a transcript's ``action:``), which text must not break into forged lines."""
    return printable(text).replace("\n", "\\n")


def plain(text: object) -> Text:
    """``text`` as rich text that is never read as markup, its controls made visible."""
    return Text(printable(text))
