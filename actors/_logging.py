"""Structured logging for the runtime: structlog, one JSON object per line.

The library never configures logging on import. Until :func:`configure_logging`
is called, the runtime emits nothing below ``warning`` and does no work for
those events: every hot path checks :func:`log_enabled` before building an
event dict, so logging that is off costs one attribute read per turn.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import uuid
from collections.abc import MutableMapping
from pathlib import Path
from typing import IO, Any, TextIO

import orjson
import structlog

__all__ = ["configure_logging", "get_logger", "log_enabled"]

DEBUG, INFO, WARNING, ERROR = logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR
_LEVELS = {
    "debug": DEBUG,
    "info": INFO,
    "warning": WARNING,
    "error": ERROR,
    "critical": logging.CRITICAL,
}


class _State:
    """Process-wide logging state; replaced as a whole by each configure call."""

    __slots__ = ("file", "logger", "run_id", "threshold")

    def __init__(self) -> None:
        self.threshold = WARNING  # silent below warning until configured
        self.run_id: str | None = None
        self.file: IO[Any] | None = None  # a file we opened and must close
        self.logger: Any = _quiet_logger()


def _quiet_logger() -> Any:
    # Whatever structlog's configuration, drop events below warning.
    return structlog.wrap_logger(None, wrapper_class=structlog.make_filtering_bound_logger(WARNING))


STATE = _State()


def log_enabled(level: int = INFO) -> bool:
    """True when runtime events at ``level`` (a :mod:`logging` number) are emitted."""
    return level >= STATE.threshold


def get_logger() -> Any:
    """The runtime's structlog logger.

    Silent below ``warning`` until :func:`configure_logging` is called; get it
    again after reconfiguring (configured loggers are cached on first use).
    """
    return STATE.logger


def _add_run_id(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    if STATE.run_id is not None:
        event_dict.setdefault("run_id", STATE.run_id)
    return event_dict


def _fallback(value: Any) -> Any:
    # orjson handles dataclasses, enums and datetimes; anything else (pydantic
    # models, sets, exceptions) is logged through its own serializer or repr.
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return dump(mode="json")
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return repr(value)


_JSON_OPTIONS = orjson.OPT_NON_STR_KEYS


def _render_bytes(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> bytes:
    return orjson.dumps(event_dict, default=_fallback, option=_JSON_OPTIONS)


def _render_text(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> str:
    return orjson.dumps(event_dict, default=_fallback, option=_JSON_OPTIONS).decode()


def configure_logging(
    target: str | os.PathLike[str] | TextIO | None = None,
    *,
    pretty: bool | None = None,
    level: str = "info",
    run_id: str | None = None,
) -> str:
    """Configure the runtime's structured logs in one call; returns the run id.

    ``target``: a path (appended to), ``"-"`` for stdout, an open text stream,
    or None for stderr. ``pretty``: a colourful console renderer instead of JSON;
    by default pretty exactly when the target is a terminal. Every line carries
    ``timestamp`` (ISO 8601, UTC), ``level``, ``event`` and ``run_id``, and is
    flushed as it is written so ``tail -f | jq`` follows a live run.

    This configures structlog globally (it is meant for entry points such as
    the CLI); call it again to switch target, and :func:`get_logger` anew.
    """
    try:
        threshold = _LEVELS[level.lower()]
    except KeyError:
        raise ValueError(f"unknown log level {level!r}; use one of {sorted(_LEVELS)}") from None
    if STATE.file is not None:
        STATE.file.close()
        STATE.file = None

    stream: TextIO | None
    binary: IO[bytes] | None = None
    if target is None:
        stream = sys.stderr
    elif isinstance(target, str | os.PathLike) and str(target) == "-":
        stream = sys.stdout
    elif isinstance(target, str | os.PathLike):
        path = Path(target)
        if path.parent != Path():
            path.parent.mkdir(parents=True, exist_ok=True)
        # Unbuffered binary file: each line goes to the OS in one write call.
        binary = open(path, "ab", buffering=0)  # kept open for the run
        STATE.file = binary
        stream = None
    else:
        stream = target
    if pretty is None:
        pretty = stream is not None and _isatty(stream)

    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        _add_run_id,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    factory: Any
    if pretty:
        processors.append(structlog.dev.ConsoleRenderer())
        factory = structlog.PrintLoggerFactory(stream)
    else:
        processors.append(structlog.processors.format_exc_info)
        if binary is not None:
            processors.append(_render_bytes)
            factory = structlog.BytesLoggerFactory(binary)
        else:
            processors.append(_render_text)
            factory = structlog.WriteLoggerFactory(stream)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=factory,
        cache_logger_on_first_use=True,
    )
    STATE.run_id = run_id or uuid.uuid4().hex
    STATE.threshold = threshold
    STATE.logger = structlog.get_logger("actors")
    return STATE.run_id


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return False


def reset_logging() -> None:
    """Back to the unconfigured state (structlog defaults, silent below warning).

    For tests and for tools that configure logging more than once.
    """
    if STATE.file is not None:
        STATE.file.close()
        STATE.file = None
    structlog.reset_defaults()
    STATE.threshold = WARNING
    STATE.run_id = None
    STATE.logger = _quiet_logger()
