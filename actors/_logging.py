"""Structured logging for the runtime: structlog's own chain, one JSON object per line.

The library never configures logging on import. Until :func:`configure_logging`
is called the runtime emits nothing below ``warning``: its warnings and errors
go through the application's structlog configuration if it made one, else to
standard error. Hot paths check :func:`log_enabled` before building an event.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any, TextIO

import structlog

from ._json import dumps, dumps_text, json_safe

__all__ = ["configure_logging", "disable_logging", "get_logger", "json_safe", "log_enabled"]

DEBUG, INFO, WARNING, ERROR = logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR
_LEVELS = MappingProxyType(
    {
        "debug": DEBUG,
        "info": INFO,
        "warning": WARNING,
        "error": ERROR,
        "critical": logging.CRITICAL,
    }
)
_TIMESTAMP = "%Y-%m-%dT%H:%M:%S.%fZ"  # ISO 8601 in UTC, always with microseconds


class _State:
    """What :func:`configure_logging` set up; None and WARNING when unconfigured."""

    def __init__(self) -> None:
        self.threshold = WARNING
        self.run_id: str | None = None
        self.file: IO[Any] | None = None  # a file we opened and must close
        self.logger: Any = None
        self.sink: Any = None  # what the rendered lines are written to
        self.chain: list[Any] | None = None  # the processors configured (one list, kept)


STATE = _State()


def log_enabled(level: int = INFO) -> bool:
    """True when runtime events at ``level`` (a :mod:`logging` number) are emitted."""
    return level >= STATE.threshold


def get_logger() -> Any:
    """The runtime's structlog logger.

    Silent below ``warning`` until :func:`configure_logging` is called; get it
    again after reconfiguring.
    """
    if STATE.logger is not None:
        return STATE.logger
    return _unconfigured_logger()


def _unconfigured_logger() -> Any:
    # Warnings and errors only: through the application's structlog
    # configuration when it made one, else readable lines on standard error.
    quiet = structlog.make_filtering_bound_logger(WARNING)
    if structlog.is_configured():
        return structlog.wrap_logger(None, wrapper_class=quiet)
    processors = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt=_TIMESTAMP, utc=True),
        _console_renderer(colors=_isatty(sys.stderr)),
    ]
    return structlog.wrap_logger(
        _StderrLogger(), processors=processors, wrapper_class=quiet, context_class=dict
    )


class _StderrLogger:
    """Standard error as it is at each call (tests and applications replace it),
    escaping what its encoding cannot take (a lone surrogate in an LLM's answer)."""

    def msg(self, message: str) -> None:
        stream = sys.stderr
        if stream is None:
            return
        try:
            print(message, file=stream, flush=True)
        except UnicodeEncodeError:
            encoding = getattr(stream, "encoding", None) or "utf-8"
            print(message.encode(encoding, "backslashreplace").decode(encoding), file=stream)

    debug = info = warning = warn = error = err = critical = exception = log = msg


@functools.cache  # stateless: one per colour setting, not one per unconfigured warning
def _console_renderer(colors: bool) -> Any:
    """structlog's console renderer, with tracebacks that leave out each frame's
    local variables (in the runtime's frames they hold whole observations)."""
    formatter: Any = structlog.dev.plain_traceback
    if colors:
        formatter = structlog.dev.RichTracebackFormatter(show_locals=False)
    return structlog.dev.ConsoleRenderer(colors=colors, exception_formatter=formatter)


class _RunStamp:
    """Processor: ``run_id`` (unless the event or the application's bound
    context carries its own) and ``timestamp``, ISO 8601 in UTC with
    microseconds. The date and time of day are formatted once a second:
    structlog's ``TimeStamper`` formats the whole stamp each time, which
    measured a sixth of a turn with instant policies (benchmarks/README.md)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._second = (0, "")  # (a whole epoch second, its "YYYY-MM-DDTHH:MM:SS")

    def __call__(
        self, _: Any, __: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        event_dict.setdefault("run_id", self.run_id)
        micros = time.time_ns() // 1000
        second, prefix = self._second
        if micros // 1_000_000 != second:
            second = micros // 1_000_000
            prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, prefix)  # one attribute: consistent across threads
        event_dict["timestamp"] = f"{prefix}.{micros % 1_000_000:06d}Z"
        return event_dict


class _LineFile:
    """structlog's logger for a file we opened: each rendered line goes to the
    OS whole, in one ``write`` as it is made (``tail -f`` sees it at once),
    and a failed write names the file."""

    def __init__(self, file: IO[bytes], path: str) -> None:
        self._fd = file.fileno()
        self._path = path
        self._lock = threading.Lock()  # lines from several threads stay whole

    def msg(self, line: bytes) -> None:
        line += b"\n"
        try:
            with self._lock:
                written = os.write(self._fd, line)
                while written < len(line):  # a write may take part of a line (a signal)
                    written += os.write(self._fd, line[written:])
        except OSError as exc:
            if exc.filename is None and exc.errno is not None:
                raise type(exc)(exc.errno, exc.strerror, self._path) from exc
            raise

    debug = info = warning = warn = error = err = critical = exception = log = msg


def configure_logging(
    target: str | os.PathLike[str] | TextIO | None = None,
    *,
    pretty: bool | None = None,
    level: str = "info",
    run_id: str | None = None,
) -> str:
    """Configure structlog for the runtime's structured logs; returns the run id.

    ``target``: a path (appended to), ``"-"`` for stdout, an open text stream,
    or None for stderr. ``pretty``: structlog's console renderer instead of
    JSON; by default pretty exactly when the target is a terminal. Every line
    carries ``timestamp`` (ISO 8601, UTC), ``level``, ``event`` and ``run_id``
    (a fresh hex id unless given; one the application binds or passes with an
    event wins on its lines), and is written as it is made.

    One call at the entry point; call again to switch target (the previous
    file is closed), and :func:`get_logger` anew.
    """
    try:
        threshold = _LEVELS[level.lower()]
    except KeyError:
        raise ValueError(f"unknown log level {level!r}; use one of {sorted(_LEVELS)}") from None
    _check_target(target)  # before the current configuration is touched
    _close_file()
    run_id = run_id or uuid.uuid4().hex
    logger, text_stream = _open_target(target, pretty)
    if pretty is None:
        pretty = text_stream is not None and _isatty(text_stream)
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        _RunStamp(run_id),
    ]
    if pretty:
        processors.append(
            _console_renderer(colors=text_stream is not None and _isatty(text_stream))
        )
    else:
        serializer = dumps if text_stream is None else dumps_text
        processors.append(structlog.processors.format_exc_info)
        processors.append(structlog.processors.JSONRenderer(serializer=serializer))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=lambda *_: logger,
        cache_logger_on_first_use=True,
    )
    STATE.run_id, STATE.threshold, STATE.sink, STATE.chain = run_id, threshold, logger, processors
    # The bound logger itself, not a lazy proxy; it shares the configured
    # processor list, so structlog.testing.capture_logs sees its events.
    STATE.logger = structlog.get_logger("actors").bind()
    return run_id


@contextlib.contextmanager
def logging_to(target: str | os.PathLike[str] | TextIO | None, **options: Any) -> Iterator[str]:
    """:func:`configure_logging` for a block (its arguments, its run id), then
    the configuration before it back as it was, structlog's own included; a
    file it had open stays open. For a part of a program whose log belongs
    elsewhere (an evaluation inside a training loop)."""
    saved = (STATE.threshold, STATE.run_id, STATE.file, STATE.logger, STATE.sink, STATE.chain)
    configured, config = structlog.is_configured(), structlog.get_config()
    STATE.file = None  # not ours to close: configure_logging would
    try:
        yield configure_logging(target, **options)
    finally:
        _close_file()
        (STATE.threshold, STATE.run_id, STATE.file, STATE.logger, STATE.sink,
         STATE.chain) = saved  # fmt: skip
        if configured:
            structlog.configure(**config)
        else:
            structlog.reset_defaults()


def emit(event: str, fields: dict[str, Any]) -> None:
    """``get_logger().info(event, **fields)`` for the runtime's own events (a
    turn, an episode's start and end), taking ``fields`` over as the event dict.

    The configured processors run on it in order, as the bound logger runs
    them, and the last one's result goes to the sink as structlog hands it on
    (``structlog.testing.capture_logs`` changes the same list, so it sees
    these events). The bound logger would first pass the fields on as
    keywords through two calls of its own: a third of a turn line's cost.
    """
    chain, sink = STATE.chain, STATE.sink  # set and cleared together
    if chain is None or INFO < STATE.threshold:
        get_logger().info(event, **fields)  # unconfigured: the usual way (and its filter)
        return
    result: Any = fields
    result["event"] = event
    try:
        for processor in chain:
            result = processor(sink, "info", result)
    except structlog.DropEvent:
        return
    if isinstance(result, tuple):  # (args, kwargs), as structlog takes it
        sink.info(*result[0], **result[1])
    elif isinstance(result, dict):
        sink.info(**result)
    else:  # a rendered line: str or bytes
        sink.info(result)


def _open_target(target: Any, pretty: bool | None) -> tuple[Any, TextIO | None]:
    """The structlog logger writing to ``target``, and the text stream behind
    it (None for a JSON file, written as bytes)."""
    if target is None or (isinstance(target, str | os.PathLike) and str(target) == "-"):
        stream = sys.stderr if target is None else sys.stdout
        return structlog.PrintLogger(stream), stream
    if not isinstance(target, str | os.PathLike):
        return structlog.WriteLogger(target), target
    path = Path(target)
    if path.parent != Path():
        path.parent.mkdir(parents=True, exist_ok=True)
    if pretty:  # the console renderer's text, into a file
        text = open(path, "a", encoding="utf-8")  # kept open for the run
        STATE.file = text
        return structlog.WriteLogger(text), text
    binary = open(path, "ab", buffering=0)  # kept open for the run
    STATE.file = binary
    return _LineFile(binary, os.fspath(target)), None


def _check_target(target: object) -> None:
    # A path, "-", None, or an open text stream; anything else is refused at
    # once, not at the first line logged.
    if target is None or isinstance(target, str | os.PathLike):
        return
    accepted = "a path, '-' (stdout), an open text stream or None (stderr)"
    if not callable(getattr(target, "write", None)):
        raise TypeError(f"configure_logging target must be {accepted}; got {target!r:.80}")
    if isinstance(target, io.RawIOBase | io.BufferedIOBase) or "b" in str(
        getattr(target, "mode", "")
    ):
        raise TypeError(
            f"configure_logging target {target!r:.80} is a binary stream; pass its path, "
            "or wrap it in io.TextIOWrapper"
        )


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return False


def _close_file() -> None:
    if STATE.file is not None:
        STATE.file.close()
        STATE.file = None


def write_lines(lines: list[str]) -> None:
    """Write log lines rendered elsewhere (JSON, by another process of the same
    run, e.g. a cluster worker) to the configured target, each whole."""
    sink = STATE.sink
    if sink is None:
        return
    binary = isinstance(sink, _LineFile)
    for line in lines:
        sink.msg(line.encode() if binary else line)


def level_name() -> str:
    """The configured threshold as a level name (``info``, ``warning``...)."""
    return next((name for name, number in _LEVELS.items() if number == STATE.threshold), "warning")


def disable_logging() -> None:
    """Stop logging: the log file :func:`configure_logging` opened is closed
    (every line already written stays), structlog is back to its defaults,
    and the runtime is silent below warning again."""
    _close_file()
    structlog.reset_defaults()
    STATE.threshold = WARNING
    STATE.run_id = None
    STATE.logger = None
    STATE.sink = None
    STATE.chain = None
