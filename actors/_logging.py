"""Structured logging for the runtime: structlog, one JSON object per line.

The library never configures logging on import. Until :func:`configure_logging`
is called, the runtime emits nothing below ``warning`` (warnings and errors go
to standard error, or through structlog's configuration once the application
made one) and does no work for those events: every hot path checks
:func:`log_enabled` before building an event dict, so logging that is off
costs one attribute read per turn.
"""

from __future__ import annotations

import functools
import io
import logging
import math
import os
import sys
import threading
import time
import uuid
from collections.abc import MutableMapping
from pathlib import Path
from typing import IO, Any, TextIO

import msgspec
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


def _emit_via_logger(method_name: str, event: str, event_dict: dict[str, Any]) -> None:
    STATE.logger.log_dict(method_name, event, event_dict)


class TurnFields(msgspec.Struct, gc=False):
    """The runtime's own fields of a ``turn`` event, in the line's order.

    A struct rather than dict entries: built in one call, and the JSON
    encoder writes its keys from bytes it encoded once (a dict's keys are
    hashed, stored and escaped again on every line).
    """

    episode_id: Any
    turn: Any
    role: Any
    reward: Any
    done: Any
    timed_out: Any
    error: Any
    latency_ms: Any


_TURN_FIELDS: tuple[str, ...] = TurnFields.__struct_fields__
# Keys the fast turn line cannot take from the described fields: the struct's,
# and those the chain sets itself (an exc_info takes the logger's way).
_TURN_RESERVED = frozenset((*_TURN_FIELDS, "event", "level", "run_id", "timestamp", "exc_info"))


def _turn_dict(extra: dict[str, Any] | None, fields: TurnFields) -> dict[str, Any]:
    # The turn event as one dict: extra's keys, then the struct's fields over them.
    event_dict = extra if extra is not None else {}
    for name in _TURN_FIELDS:
        event_dict[name] = getattr(fields, name)
    return event_dict


def _emit_turn_as_dict(extra: dict[str, Any] | None, fields: TurnFields) -> None:
    STATE.emit("info", "turn", _turn_dict(extra, fields))


def _route_through_logger() -> None:
    # The runtime's events through STATE.logger (no file of ours to write to).
    STATE.emit = _emit_via_logger
    STATE.emit_turn = _emit_turn_as_dict


class _State:
    """Process-wide logging state; replaced as a whole by each configure call."""

    __slots__ = ("emit", "emit_turn", "file", "json_line", "logger", "run_id", "threshold")

    def __init__(self) -> None:
        self.threshold = WARNING  # silent below warning until configured
        self.run_id: str | None = None
        self.file: IO[Any] | None = None  # a file we opened and must close
        self.logger: Any = _quiet_logger()
        # The JSON chains' one processor.
        self.json_line: _JsonLine | None = None
        self.emit: Any = _emit_via_logger  # what emit() calls,
        self.emit_turn: Any = _emit_turn_as_dict  # and emit_turn() (see _route_through_logger)


def _quiet_logger() -> Any:
    # Whatever structlog's configuration, drop events below warning.
    return structlog.wrap_logger(
        _StderrOrApplication(),
        processors=[_structlog_chain],
        wrapper_class=structlog.make_filtering_bound_logger(WARNING),
    )


class _StderrOrApplication:
    """Where the unconfigured runtime's warnings and errors go: standard error,
    like Python's own unconfigured warnings (a program's standard output is
    its results: a table, a JSON document); once the application configured
    structlog, its logger. Decided per event, as :func:`_structlog_chain` does.
    """

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if structlog.is_configured():
            return getattr(structlog.get_config()["logger_factory"](), name)
        return _print_to_stderr


def _print_to_stderr(message: Any, *_: Any, **__: Any) -> None:
    stream = sys.stderr  # at call time: it may have been replaced
    if stream is not None:
        print(message, file=stream, flush=True)


def _console_renderer(colors: bool = True) -> Any:
    """structlog's console renderer, with tracebacks that leave out each frame's
    local variables: in the runtime's frames they hold whole observations, a
    hundred lines and more per policy error (structlog shows them by default).
    Without colours (not a terminal), Python's own plain traceback."""
    formatter: Any = structlog.dev.plain_traceback
    if colors:
        formatter = structlog.dev.RichTracebackFormatter(show_locals=False)
    return structlog.dev.ConsoleRenderer(colors=colors, exception_formatter=formatter)


def _structlog_chain(logger: Any, method_name: str, event_dict: Any) -> Any:
    """The unconfigured runtime's processor: structlog's own chain once the
    application configured structlog, else structlog's default chain with
    :func:`_console_renderer`."""
    if structlog.is_configured():
        chain = structlog.get_config()["processors"]
    else:
        chain = _default_chain()
    for processor in chain:
        event_dict = processor(logger, method_name, event_dict)
    return event_dict


@functools.cache
def _default_chain() -> tuple[Any, ...]:
    # structlog's built-in default processors, its console renderer replaced.
    colors = sys.stderr is not None and _isatty(sys.stderr)
    return tuple(
        _console_renderer(colors) if isinstance(p, structlog.dev.ConsoleRenderer) else p
        for p in structlog.get_config()["processors"]  # its defaults: called unconfigured
    )


STATE = _State()


def log_enabled(level: int = INFO) -> bool:
    """True when runtime events at ``level`` (a :mod:`logging` number) are emitted."""
    return level >= STATE.threshold


def emit(method_name: str, event: str, event_dict: dict[str, Any]) -> None:
    """Log one of the runtime's own events; ``event_dict`` is handed over.

    ``method_name`` is a level's name (``"info"``, ``"warning"``, ``"error"``).
    The caller checked :func:`log_enabled`. With the JSON chain configured to
    a file, :meth:`_JsonLine.emit` renders and writes the line itself, without
    the bound logger's per-call dispatch (the same JSON object, a few us less
    for the event logged on every turn); otherwise through the logger.
    """
    STATE.emit(method_name, event, event_dict)


def emit_turn(extra: dict[str, Any] | None, fields: TurnFields) -> None:
    """Log a ``turn`` event at info: ``extra``'s keys (a dict handed over: the
    described fields and annotations), then ``fields``, which win over them.

    The caller checked :func:`log_enabled`. With the JSON chain configured to
    a file, :meth:`_JsonLine.emit_turn` writes the line without building the
    event's dict; otherwise it is built and goes through :func:`emit`.
    """
    STATE.emit_turn(extra, fields)


_write = os.write
_writev = os.writev
_thread_id = threading.get_ident


def _write_rest(write: Any, line: bytes, written: int) -> None:
    # After a short write (a signal, a full disk): the file only holds whole lines.
    view = memoryview(line)
    while written < len(line):
        written += write(view[written:]) or 0


def _named(exc: OSError, path: str) -> OSError:
    """``exc`` (a failed write to the log file) with the file's path: "[Errno 28]
    No space left on device: 'run.jsonl'" rather than a bare errno. The same
    subclass (the errno picks it), the original chained by the caller."""
    if exc.filename is not None or exc.errno is None:
        return exc
    return OSError(exc.errno, exc.strerror, path)


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


_DIGITS = tuple(f"{i:03d}" for i in range(1000))
_DIGITS_B = tuple(d.encode() for d in _DIGITS)
_DIGITS_END = tuple(f'{d}Z"}}\n'.encode() for d in _DIGITS)  # a line's last bytes
_MICROS_SIZE = len(_DIGITS_B[0]) + len(_DIGITS_END[0])
_time = time.time  # tests set the clock here
_floor = math.floor  # of a float: a third of int()'s cost


class _IsoUtcStamper:
    """``timestamp``: ISO 8601 in UTC with microseconds, ``2026-11-21T19:45:03.123456Z``.

    The date and time of day are formatted once per second and cached; each
    event only formats its microseconds (about 1 us, against ~2.5 us for
    structlog's ``TimeStamper(fmt="iso", utc=True)``, which moreover drops the
    fraction when it happens to be zero).
    """

    __slots__ = ("_cache",)

    def __init__(self) -> None:
        self._cache = (-2.0, "")  # (start of an epoch second, its "YYYY-MM-DDTHH:MM:SS.")

    def now(self) -> str:
        # A float: at today's epoch seconds its step is 0.24 us, finer than the
        # microsecond written; time_ns() would mean arithmetic on big ints.
        now = _time()
        start, prefix = self._cache
        fraction = now - start
        if not 0.0 <= fraction < 1.0:  # another second: no division otherwise
            start, prefix = self.second(now)
            fraction = now - start
        micros = _floor(fraction * 1e6)  # truncated, as datetime's isoformat() does
        # Two table lookups instead of a "06d" format: less work, and less code
        # that a turn's other work pushes out of the CPU's caches in between.
        return f"{prefix}{_DIGITS[micros // 1000]}{_DIGITS[micros % 1000]}Z"

    def second(self, now: float) -> tuple[float, str]:
        """The start of ``now``'s second and its ``"YYYY-MM-DDTHH:MM:SS."``, cached."""
        start = float(_floor(now))
        self._cache = start, time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(start))
        return self._cache  # one attribute: consistent across threads

    def __call__(
        self, _: Any, __: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        event_dict["timestamp"] = self.now()
        return event_dict


try:  # structlog's registry: one ContextVar per key ever bound with bind_contextvars
    from structlog.contextvars import _CONTEXT_VARS
except ImportError:  # pragma: no cover - another structlog layout
    _CONTEXT_VARS = None


def _merge_contextvars(
    logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """``structlog.contextvars.merge_contextvars``, reading only the variables
    structlog registered (one per key ever bound) instead of walking every
    context variable of the context (about 1 us less an event)."""
    if _CONTEXT_VARS is None:  # pragma: no cover
        return structlog.contextvars.merge_contextvars(logger, method_name, event_dict)
    for key, var in _known_vars():  # the dict's keys first: cheaper than var.get
        if key not in event_dict and (value := var.get(Ellipsis)) is not Ellipsis:
            event_dict[key] = value
    return event_dict


def _known_vars() -> tuple[tuple[str, Any], ...]:
    """((key, ContextVar) of each key ever bound with ``bind_contextvars``, ...)."""
    pairs = _KNOWN_VARS[1]
    if _KNOWN_VARS[0] != len(_CONTEXT_VARS):  # the registry only grows: rebuild when it did
        pairs = tuple((name[_PREFIX_LEN:], var) for name, var in tuple(_CONTEXT_VARS.items()))
        beside = tuple(var for key, var in pairs if key not in _TURN_FIELDS)
        _KNOWN_VARS[:] = [len(pairs), pairs, beside]
    return pairs


def _bound_beside_turn() -> bool:
    """Whether a context variable not named like one of :class:`TurnFields` has a value."""
    _known_vars()
    return any(var.get(Ellipsis) is not Ellipsis for var in _KNOWN_VARS[2])


_PREFIX_LEN = len("structlog_")
# (registry size, ((key, ContextVar), ...), (ContextVar of a key not in TurnFields, ...))
_KNOWN_VARS: list[Any] = [0, (), ()]


_LEVEL_NAMES = {
    "debug": "debug", "info": "info", "msg": "info", "warning": "warning", "warn": "warning",
    "error": "error", "err": "error", "exception": "error", "critical": "critical",
    "fatal": "critical", "failure": "error", "log": "info",
}  # fmt: skip


def _fallback(value: Any) -> Any:
    # msgspec renders str, numbers (any int), bools, None, dicts (keys of
    # str, numbers or enums), lists, tuples, sets, dataclasses, datetimes,
    # enums (as their value) and bytes (base64) itself; anything else, as a
    # value or a key, lands here.
    dump = getattr(value, "model_dump", None)
    if dump is not None:  # pydantic models
        return dump(mode="json")
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    return repr(value)


# msgspec rather than orjson (used for the project's other files) for the log
# lines: encode_into() writes a line into a buffer kept from line to line, so a
# line allocates nothing (orjson allocates a new 1 KiB buffer through the C
# allocator for every line, a good part of what logging costs a turn).
_ENCODER = msgspec.json.Encoder(enc_hook=_fallback)
_encode_into = _ENCODER.encode_into


def _render_line(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> bytes:
    line = bytearray()
    _ENCODER.encode_into(event_dict, line)
    line.append(10)  # the newline: one buffer, one write
    return bytes(line)


def render_json(value: Any) -> str:
    """``value`` as JSON text, the way a log line renders it (see :func:`_fallback`)."""
    return _ENCODER.encode(value).decode()


def _render_text(logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> str:
    return render_json(event_dict)


class _JsonLine:
    """The whole JSON chain in one processor: the context variables bound with
    structlog's ``bind_contextvars``, ``level``, ``run_id``, the traceback of
    an ``exc_info`` (policy_error), ``timestamp``, then the rendered line.

    What ``merge_contextvars``, ``add_log_level``, a run-id processor,
    ``format_exc_info``, a timestamper and a renderer do one after the other,
    in one call: a log line per turn pays for one processor call instead of six.
    """

    __slots__ = (
        "_body", "_buffer", "_chain", "_fd", "_head", "_path", "_stamp", "_tails", "_text",
        "_thread", "_turn_tail",
    )  # fmt: skip

    def __init__(self, text: bool) -> None:
        self._stamp = _IsoUtcStamper()
        self._text = text  # str for a text stream, else bytes with the newline
        self._chain: list[Any] = []  # structlog's processor list, once configured
        self._fd = -1  # the file emit() writes to, once configured
        self._path = ""  # its path, named by a write that fails
        self._buffer = bytearray(512)  # emit()'s line, in the thread that made this
        self._head = bytearray(128)  # emit_turn()'s parts, likewise: extra
        self._body = bytearray(256)  # and the struct
        self._thread = _thread_id()
        # emit()'s line tails: event -> (start of a second, level, encoded tail)
        self._tails: dict[str, tuple[Any, ...]] = {}
        self._turn_tail: tuple[Any, ...] = (-2.0,)  # emit_turn()'s, none yet

    def __call__(self, logger: Any, method_name: str, event_dict: Any) -> bytes | str:
        _merge_contextvars(logger, method_name, event_dict)
        event_dict["level"] = _LEVEL_NAMES.get(method_name, method_name)
        _add_run_id(logger, method_name, event_dict)
        if "exc_info" in event_dict:
            event_dict = structlog.processors.format_exc_info(logger, method_name, event_dict)
        event_dict["timestamp"] = self._stamp.now()
        if self._text:
            return _render_text(logger, method_name, event_dict)
        return _render_line(logger, method_name, event_dict)

    def emit(self, method_name: str, event: str, event_dict: dict[str, Any]) -> None:
        """:func:`emit` with this chain writing to a file: render, then write.

        ``__call__``'s steps, and the write: the same line with less work, for
        the line written in the middle of every turn. No bound-logger dispatch
        and the level's own name; the context variables merged into the dict,
        which is encoded into a buffer kept from line to line; then, in place
        of its closing brace, the line's tail from a cache: ``event``,
        ``level``, ``run_id`` and the timestamp up to its second, encoded once
        per event and second, and the microseconds from a table. Once the
        processors were swapped (``capture_logs``), or for an ``exc_info``,
        the event takes the logger's way; an empty dict or one holding a key
        of the tail's takes :meth:`_emit_dict`.
        """
        chain = self._chain
        if len(chain) != 1 or chain[0] is not self or "exc_info" in event_dict:
            return STATE.logger.log_dict(method_name, event, event_dict)
        _merge_contextvars(None, method_name, event_dict)
        if (
            not event_dict
            or "event" in event_dict
            or "level" in event_dict
            or "run_id" in event_dict
            or "timestamp" in event_dict
        ):
            return self._emit_dict(method_name, event, event_dict)
        now = _time()
        tail = self._tails.get(event)
        if tail is None or not 0.0 <= now - tail[0] < 1.0 or tail[1] != method_name:
            tail = self._tail(method_name, event, now)
        micros = _floor((now - tail[0]) * 1e6)  # truncated, as datetime's isoformat() does
        # into the buffer of the thread that configured logging (the event
        # loop's, as a rule), or a new one in another thread
        line = self._buffer if _thread_id() == self._thread else bytearray()
        _encode_into(event_dict, line)
        line[-1:] = tail[2]  # '}' -> ',"event":..,"timestamp":"YYYY-MM-DDTHH:MM:SS.'
        line += _DIGITS_B[micros // 1000]
        line += _DIGITS_END[micros % 1000]  # 'uuuZ"}\n'
        self._write_line(line)

    def emit_turn(self, extra: dict[str, Any] | None, fields: TurnFields) -> None:
        """:func:`emit_turn` with this chain writing to a file.

        The line :meth:`emit` would write for :func:`_turn_dict`'s dict,
        without building that dict: ``extra`` and the struct encoded each
        into a buffer of its own, the tail from :meth:`_tail`, joined by the
        kernel (one ``writev``, one line). Where the two could differ
        (``extra`` holds a key of the struct's or of the tail's, a context
        variable other than the struct's keys is bound, the processors were
        swapped), the dict is built and goes through :meth:`emit`.
        """
        chain = self._chain
        if (
            ((_KNOWN_VARS[0] != len(_CONTEXT_VARS) or _KNOWN_VARS[2]) and _bound_beside_turn())
            or len(chain) != 1
            or chain[0] is not self
            or (extra and not _TURN_RESERVED.isdisjoint(extra))
        ):
            return self.emit("info", "turn", _turn_dict(extra, fields))
        now = _time()
        tail = self._turn_tail
        if not 0.0 <= now - tail[0] < 1.0:  # another second
            tail = self._turn_tail = self._tail("info", "turn", now)
        micros = _floor((now - tail[0]) * 1e6)
        if _thread_id() == self._thread:
            head, body = self._head, self._body
        else:
            head, body = bytearray(), bytearray()
        # One buffer for both would be shrunk and grown again by each
        # encoding (a reallocation or two a line); writev joins the parts.
        _encode_into(fields, body)
        body[-1] = 44  # '}' -> ','
        if extra:
            _encode_into(extra, head)
            head[-1] = 44  # '}' -> ','
            body[0] = 32  # '{' -> ' ' (JSON's whitespace: no copy to drop it)
            parts: tuple[Any, ...] = (head, body, tail[3], _DIGITS_B[micros // 1000],
                                      _DIGITS_END[micros % 1000])  # fmt: skip
            size = len(head) + len(body) + tail[4]
        else:
            parts = (body, tail[3], _DIGITS_B[micros // 1000], _DIGITS_END[micros % 1000])
            size = len(body) + tail[4]
        try:
            if (written := _writev(self._fd, parts)) < size:  # interrupted
                _write_rest(lambda rest: _write(self._fd, rest), b"".join(parts), written)
        except OSError as exc:  # a full disk, say: the error names the file
            raise _named(exc, self._path) from exc

    def _tail(self, method_name: str, event: str, now: float) -> tuple[Any, ...]:
        """``(start of now's second, level, tail, tail without its comma, size)``.

        The tail of a line up to that second, ``,"event":...,"level":...,
        "run_id":...,"timestamp":"YYYY-MM-DDTHH:MM:SS.``, before which
        :meth:`emit` puts the encoded dict and :meth:`emit_turn` its parts,
        and after which the microseconds, ``Z"}`` and a newline follow; the
        size: that of the tail without its comma and of what follows.
        """
        start, prefix = self._stamp.second(now)
        keys = {"event": event, "level": method_name, "run_id": STATE.run_id, "timestamp": prefix}
        bare = _ENCODER.encode(keys)[1:-2]  # no braces, no closing quote
        tail = start, method_name, b"," + bare, bare, len(bare) + _MICROS_SIZE
        if len(self._tails) < 256:  # the runtime's events are few; anything else: not kept
            self._tails[event] = tail
        return tail

    def _emit_dict(self, method_name: str, event: str, event_dict: dict[str, Any]) -> None:
        # emit() for a dict that is empty or holds keys of the tail's: the keys
        # set in the dict, as the chain sets them, and the whole dict encoded.
        event_dict["event"] = event
        event_dict["level"] = method_name  # a level's own name (see emit)
        if "run_id" not in event_dict:  # _add_run_id (configure_logging always sets one)
            event_dict["run_id"] = STATE.run_id
        event_dict["timestamp"] = self._stamp.now()
        line = self._buffer if _thread_id() == self._thread else bytearray()
        _encode_into(event_dict, line)
        line.append(10)
        self._write_line(line)

    def _write_line(self, line: bytearray) -> None:
        # One write call; after a short one, the rest of the line.
        try:
            if (written := _write(self._fd, line)) < len(line):
                _write_rest(lambda rest: _write(self._fd, rest), line, written)
        except OSError as exc:
            raise _named(exc, self._path) from exc


class _LineWriter:
    """A structlog logger writing each rendered line to an unbuffered binary file.

    One line, one ``write`` system call: nothing is held back in a buffer (a
    follower sees each line as it is logged) and the file only ever holds whole
    lines. No lock: appends of one buffer do not interleave.
    """

    __slots__ = ("_path", "_write")

    def __init__(self, file: IO[bytes]) -> None:
        self._write = file.write  # a closed file raises, it never writes elsewhere
        self._path = os.fsdecode(file.name) if isinstance(file.name, str | bytes) else ""

    def msg(self, line: bytes) -> None:
        try:
            written = self._write(line)
            if written is not None and written < len(line):  # interrupted: finish the line
                _write_rest(self._write, line, written)
        except OSError as exc:  # the error names the file
            raise _named(exc, self._path) from exc

    log = debug = info = warn = warning = msg
    fatal = failure = err = error = critical = exception = msg


_TEXT = (str, bytes, bytearray)


def _bound_logger_class(threshold: int) -> type[Any]:
    """structlog's filtering bound logger, minus its per-event dict copies.

    structlog copies an event's keywords three times on the way to the
    processors (into ``_proxy_to_logger``, into the bound context's copy, and
    through ``update(**kw)``). The keywords of a call already are a fresh dict:
    here they become the event dict itself (merged after the bound context, as
    structlog does). Levels below ``threshold`` stay structlog's no-ops.
    """
    base: Any = structlog.make_filtering_bound_logger(threshold)

    def emit(self: Any, method_name: str, event: str | None, event_dict: dict[str, Any]) -> Any:
        context = self._context
        if context:
            event_dict = {**context, **event_dict}
        if event is not None:
            event_dict["event"] = event
        logger = self._logger
        result: Any = event_dict
        try:
            for processor in self._processors:
                result = processor(logger, method_name, result)
        except structlog.DropEvent:
            return None
        if type(result) is bytes or isinstance(result, _TEXT):
            return getattr(logger, method_name)(result)
        if isinstance(result, tuple):
            args, kw = result
            return getattr(logger, method_name)(*args, **kw)
        if isinstance(result, dict):
            return getattr(logger, method_name)(**result)
        raise ValueError(
            "Last processor didn't return an appropriate value.  Valid return values are "
            "a dict, a tuple of (args, kwargs), bytes, or a str."
        )

    def _proxy_to_logger(
        self: Any, method_name: str, event: str | None = None, **event_kw: Any
    ) -> Any:
        return emit(self, method_name, event, event_kw)

    def make_method(name: str) -> Any:
        interpolating = getattr(base, name)

        def meth(self: Any, event: str, *args: Any, **kw: Any) -> Any:
            if args:  # "%s"-style arguments: structlog's own path
                return interpolating(self, event, *args, **kw)
            return emit(self, name, event, kw)

        meth.__name__ = meth.__qualname__ = name
        return meth

    def log_dict(self: Any, method_name: str, event: str, event_dict: dict[str, Any]) -> Any:
        # The runtime's hot events: a dict it built and gives away (no kwargs copy).
        return emit(self, method_name, event, event_dict)

    methods: dict[str, Any] = {"_proxy_to_logger": _proxy_to_logger, "log_dict": log_dict}
    for level, name in ((DEBUG, "debug"), (INFO, "info"), (WARNING, "warning"),
                        (ERROR, "error"), (logging.CRITICAL, "critical")):  # fmt: skip
        if level >= threshold:
            methods[name] = make_method(name)
    for alias, name in (("msg", "info"), ("warn", "warning"), ("fatal", "critical")):
        if name in methods:
            methods[alias] = methods[name]
    return type(base.__name__, (base,), methods)


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

    ``run_id``: the id of every line (default a fresh hex id, returned). A
    ``run_id`` of the application's, bound with structlog's
    ``bind_contextvars`` or passed with an event, is kept on its lines instead
    (the application's id wins; pass it here to have it on every line).

    This configures structlog globally (it is meant for entry points such as
    the CLI); call it again to switch target, and :func:`get_logger` anew.
    """
    try:
        threshold = _LEVELS[level.lower()]
    except KeyError:
        raise ValueError(f"unknown log level {level!r}; use one of {sorted(_LEVELS)}") from None
    _check_target(target)  # before the current configuration is touched
    _route_through_logger()  # before its file closes
    if STATE.file is not None:
        STATE.file.close()
        STATE.file = None
    run_id = run_id or uuid.uuid4().hex

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
        if pretty:
            # Pretty lines asked for a file: the console renderer's text, into it.
            stream = open(path, "a", encoding="utf-8")  # kept open for the run
            STATE.file = stream
        else:
            # Unbuffered binary file: each line goes to the OS in one write call.
            binary = open(path, "ab", buffering=0)  # kept open for the run
            STATE.file = binary
            stream = None
    else:
        stream = target
    if pretty is None:
        pretty = stream is not None and _isatty(stream)

    # The chain: context, level, run id, exception, timestamp, render (the
    # JSON chains do all six in one processor: there is a line per turn).
    processors: list[Any]
    factory: Any
    if pretty:
        processors = [
            _merge_contextvars,
            structlog.processors.add_log_level,
            _add_run_id,
            _IsoUtcStamper(),
            # colours for a terminal; plain text for a file or a pipe
            _console_renderer(colors=stream is not None and _isatty(stream)),
        ]
        factory = structlog.PrintLoggerFactory(stream)
    elif binary is not None:
        writer = _LineWriter(binary)
        processors = [_JsonLine(text=False)]
        factory = lambda *_: writer  # noqa: E731
    else:
        processors = [_JsonLine(text=True)]
        factory = structlog.WriteLoggerFactory(stream)
    structlog.configure(
        processors=processors,
        wrapper_class=_bound_logger_class(threshold),
        logger_factory=factory,
        cache_logger_on_first_use=True,
    )
    STATE.run_id = run_id
    STATE.threshold = threshold
    # The bound logger itself, not a lazy proxy: no configuration lookup per
    # call. It shares the configured processor list, so structlog.testing's
    # capture_logs still sees its events.
    STATE.logger = structlog.get_logger("actors").bind()
    STATE.json_line = processors[0] if isinstance(processors[0], _JsonLine) else None
    if binary is not None and STATE.json_line is not None and _CONTEXT_VARS is not None:
        # emit() writes the JSON chain's lines to our file itself, one write each.
        STATE.json_line._chain = STATE.logger._processors
        STATE.json_line._fd = binary.fileno()
        STATE.json_line._path = writer._path
        STATE.emit = STATE.json_line.emit
        STATE.emit_turn = STATE.json_line.emit_turn
    else:
        _route_through_logger()
    return STATE.run_id


def _check_target(target: object) -> None:
    # A path, "-", None, or an open text stream; anything else is refused at
    # once, not at the first line logged (a binary file) or with an
    # AttributeError (a number).
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


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return False


def reset_logging() -> None:
    """Back to the unconfigured state (structlog defaults, silent below warning).

    For tests and for tools that configure logging more than once.
    """
    _route_through_logger()  # before its file closes
    if STATE.file is not None:
        STATE.file.close()
        STATE.file = None
    structlog.reset_defaults()
    STATE.threshold = WARNING
    STATE.run_id = None
    STATE.logger = _quiet_logger()
    STATE.json_line = None
