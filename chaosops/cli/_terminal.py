"""Where text goes: rich consoles for tables, notes on stderr, JSON logs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from ._errors import PROG, CLIError


def console_for(stream: TextIO) -> Any:
    """A rich console writing to ``stream`` (160 columns when it is not a terminal)."""
    from rich.console import Console

    width = None if stream.isatty() else 160
    return Console(file=stream, width=width, highlight=False)


def configure_logs(args: argparse.Namespace) -> TextIO:
    """Configure JSON logs; return the stream for tables and notes."""
    if not args.log_json:
        return sys.stdout
    from actors import configure_logging

    if args.log_json == "-":
        configure_logging(sys.stdout, pretty=False)
        return sys.stderr
    path = Path(args.log_json)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise CLIError(
            f"cannot write the log file {args.log_json}: {exc.strerror or exc}", code=1
        ) from None
    configure_logging(path, pretty=False)
    return sys.stdout


def note(text: str) -> None:
    """One line ``chaosops: <text>`` on stderr."""
    sys.stderr.write(f"{PROG}: {text}\n")
    sys.stderr.flush()
