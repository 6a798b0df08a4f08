"""Structured logging for the runtime: structlog, one JSON object per line.

The library never configures logging on import. Until :func:`configure_logging`
is called, the runtime emits nothing below ``warning`` (warnings and errors go
to standard error, or through structlog's configuration once the application
made one) and does no work for those events: every hot path checks
:func:`log_enabled` before building an event dict, so logging that is off
costs one attribute read per turn.
"""

from __future__ import annotations

import contextvars
import dataclasses
import datetime
import enum
import functools
import io
import logging
import math
import os
import sys
import time
import uuid
from collections.abc import MutableMapping
from pathlib import Path
from typing import IO, Any, TextIO

import msgspec
import orjson
import structlog
from structlog.contextvars import bind_contextvars

__all__ = ["configure_logging", "disable_logging", "get_logger", "json_safe", "log_enabled"]

DEBUG, INFO, WARNING, ERROR = logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR
_LEVELS = {
    "debug": DEBUG,
    "info": INFO,
    "warning": WARNING,
    "error": ERROR,
    "critical": logging.CRITICAL,
}


def _route_through_logger() -> None:
    # The runtime's events through STATE.logger (no file of ours to write to):
    # the methods of a _JsonLine attached to no chain hand every event to it.
    STATE.emit = _TO_LOGGER.emit
    STATE.emit_turn = _TO_LOGGER.emit_turn


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
        self.emit: Any = None  # what emit() calls,
        self.emit_turn: Any = None  # and emit_turn() (see _route_through_logger)


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
    if stream is None:
        return
    try:
        print(message, file=stream, flush=True)
    except UnicodeEncodeError:  # a stream that cannot take some character (a lone surrogate)
        encoding = getattr(stream, "encoding", None) or "utf-8"
        text = str(message).encode(encoding, "backslashreplace").decode(encoding)
        print(text, file=stream, flush=True)


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


def emit_turn(extra: dict[str, Any] | None, *fields: Any) -> None:
    """Log a ``turn`` event at info: ``extra``'s keys (a dict handed over: the
    described fields and annotations), then the runtime's own ``fields``
    (episode_id, turn, role, reward, done, timed_out, error, latency_ms, in
    this order), which win over them. The caller checked :func:`log_enabled`.

    With the JSON chain configured to a file, the line is written by
    :meth:`_JsonLine.emit_turn` (what the coordinator calls, as
    ``STATE.emit_turn``); otherwise the event goes through the logger.
    """
    STATE.emit_turn(extra, *fields)


_write = os.write


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


def bind_actor(role: Any) -> Any:
    """Bind ``role`` in the calling task's context (an actor's own task) and
    return a function that binds ``turn``: what a policy logs with structlog
    carries ``episode_id``, ``role`` and ``turn`` (through ``merge_contextvars``).

    The function is the ``turn`` context variable's ``set`` (well under a
    microsecond a turn), or ``bind_contextvars`` where structlog's registry of
    variables cannot be read.
    """
    if not _ACTOR_VARS:
        if _CONTEXT_VARS is None:  # pragma: no cover - another structlog layout
            bind_contextvars(role=role, turn=-1)
            return lambda turn: bind_contextvars(turn=turn)
        # Registered once, in a context thrown away: structlog's variables
        # for the two keys (bind_contextvars costs microseconds a call).
        contextvars.copy_context().run(bind_contextvars, role=None, turn=None)
        _ACTOR_VARS[:] = _CONTEXT_VARS["structlog_role"], _CONTEXT_VARS["structlog_turn"]
    role_var, turn_var = _ACTOR_VARS
    role_var.set(role)
    turn_var.set(-1)
    return turn_var.set


_ACTOR_VARS: list[Any] = []  # structlog's ContextVars of "role" and "turn", once registered


def _known_vars() -> tuple[tuple[str, Any], ...]:
    """((key, ContextVar) of each key ever bound with ``bind_contextvars``, ...)."""
    pairs = _KNOWN_VARS[1]
    if _KNOWN_VARS[0] != len(_CONTEXT_VARS):  # the registry only grows: rebuild when it did
        pairs = tuple((name[_PREFIX_LEN:], var) for name, var in tuple(_CONTEXT_VARS.items()))
        _KNOWN_VARS[:] = [len(pairs), pairs, any(key not in _TURN_KEYS for key, _ in pairs)]
    return pairs


# The keys every turn event has before the context variables are merged: a
# variable bound under one of them never adds to a turn line.
_TURN_KEYS = frozenset(("episode_id", "turn", "role", "reward", "done", "timed_out", "error",
                        "latency_ms", "event"))  # fmt: skip


_PREFIX_LEN = len("structlog_")
# (registry size, ((key, ContextVar), ...), whether a key is not in _TURN_KEYS)
_KNOWN_VARS: list[Any] = [0, (), False]


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


def _fast_fallback(value: Any) -> Any:
    # orjson's default: what neither encoder takes itself (see _fallback);
    # for anything msgspec takes and orjson does not (sets, bytes, named
    # tuples, Decimal...), TypeError, and the line is msgspec's.
    if getattr(value, "model_dump", None) is not None or isinstance(
        value, os.PathLike | BaseException
    ):
        return _fallback(value)
    raise TypeError


# The lines are rendered by orjson, and by msgspec (with the same fallback)
# when orjson refuses a value: a dict key that is not a string, an int past
# 64 bits, a set. The two write the same JSON for what orjson takes (floats
# may differ in the exponent's form: 1e+22 against 1e22, the same number).
# Measured in figure 1's runs, orjson's fresh bytes and one write() per line
# cost less than msgspec's encode_into() into a buffer kept from line to line
# and writev() of the parts (benchmarks/README.md).
_dumps = orjson.dumps
_OPTIONS = orjson.OPT_UTC_Z  # an aware UTC datetime ends in Z, as msgspec writes it
_LINE_OPTIONS = _OPTIONS | orjson.OPT_APPEND_NEWLINE
_ENCODER = msgspec.json.Encoder(enc_hook=_fallback)


def _json(value: Any) -> bytes:
    try:
        return _dumps(value, _fast_fallback, _OPTIONS)
    except TypeError:
        try:
            return _ENCODER.encode(value)
        except Exception:  # what JSON cannot hold (see json_safe): replaced, never lost
            return _dumps(json_safe(value), _repr_fallback, _OPTIONS)


def _json_line(value: Any) -> bytes:
    """``value`` as one line of JSON, the newline included."""
    try:
        return _dumps(value, _fast_fallback, _LINE_OPTIONS)
    except TypeError:
        try:
            return _ENCODER.encode(value) + b"\n"
        except Exception:  # what JSON cannot hold (see json_safe): replaced, never lost
            return _dumps(json_safe(value), _repr_fallback, _LINE_OPTIONS)


_MAX_DEPTH = 64  # json_safe's nesting limit: deeper values are cut


def json_safe(value: Any) -> Any:
    """``value`` with what no JSON encoder takes replaced, for a line that must
    still be written (a log line, a results line) when encoding it failed:

    - a string that is not valid UTF-8 (a lone surrogate, such as
      ``json.loads('"\\ud800"')`` or an undecodable file name gives) has
      those characters escaped (``"db\\ud800"``);
    - a container that holds itself is cut at the repetition (``"<cycle>"``),
      nesting deeper than 64 levels at that depth (``"<too deep>"``);
    - a key that is not a string becomes its ``str``; an integer past 64
      bits, its decimal string; a pydantic model its ``model_dump``; an
      enum its value; anything else its ``repr``.

    A value with none of those is returned as JSON would hold it. Costs a walk
    of the whole value: for the failure path, not for every line.
    """
    return _safe(value, 0, set())


def _safe(value: Any, depth: int, seen: set[int]) -> Any:
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode()
        return value
    if value is None or isinstance(value, bool | float):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**64 else str(value)
    if isinstance(value, enum.Enum):
        return _safe(value.value, depth, seen)
    if depth >= _MAX_DEPTH:
        return "<too deep>"
    if isinstance(value, dict | list | tuple | set | frozenset):
        if id(value) in seen:
            return "<cycle>"
        seen.add(id(value))
        try:
            if isinstance(value, dict):
                return {
                    _safe(k if isinstance(k, str) else str(k), depth, seen): _safe(
                        v, depth + 1, seen
                    )
                    for k, v in value.items()
                }
            return [_safe(item, depth + 1, seen) for item in value]
        finally:
            seen.discard(id(value))
    if isinstance(value, datetime.date | datetime.time | uuid.UUID):
        return value  # orjson writes these itself
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name, None) for f in dataclasses.fields(value)}
        return _safe(fields, depth, seen)
    try:  # the log lines' own conversion: a model's dump, a path, an error's text, a repr
        converted = _fallback(value)
    except Exception:  # a model that cannot dump itself, a repr that raises
        return f"<{type(value).__name__}>"
    return _safe(converted, depth + 1, seen)


def _repr_fallback(value: Any) -> Any:
    # orjson's default after json_safe (nothing should be left for it)
    return repr(value)


def _render_line(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> bytes:
    return _json_line(event_dict)


def render_json(value: Any) -> str:
    """``value`` as JSON text, the way a log line renders it (see :func:`_fallback`)."""
    return _json(value).decode()


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

    __slots__ = ("_chain", "_fd", "_path", "_stamp", "_text")

    def __init__(self, text: bool) -> None:
        self._stamp = _IsoUtcStamper()
        self._text = text  # str for a text stream, else bytes with the newline
        self._chain: list[Any] = []  # structlog's processor list, once configured
        self._fd = -1  # the file emit() writes to, once configured
        self._path = ""  # its path, named by a write that fails

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

    def emit_turn(
        self,
        extra: dict[str, Any] | None,
        episode_id: Any,
        turn: Any,
        role: Any,
        reward: Any,
        done: Any,
        timed_out: Any,
        error: Any,
        latency_ms: Any,
    ) -> None:
        """:func:`emit_turn` with this chain writing to a file: :meth:`emit`'s
        steps for the turn's dict, in one function (a line every turn). The
        context variables are merged only when one is registered under a key
        the dict does not always hold (the runtime binds ``episode_id``)."""
        event_dict = {} if extra is None else extra
        event_dict["episode_id"] = episode_id
        event_dict["turn"] = turn
        event_dict["role"] = role
        event_dict["reward"] = reward
        event_dict["done"] = done
        event_dict["timed_out"] = timed_out
        event_dict["error"] = error
        event_dict["latency_ms"] = latency_ms
        chain = self._chain
        if len(chain) != 1 or chain[0] is not self or "exc_info" in event_dict:
            return STATE.logger.log_dict("info", "turn", event_dict)
        event_dict["event"] = "turn"
        if _KNOWN_VARS[2] or _KNOWN_VARS[0] != len(_CONTEXT_VARS):
            _merge_contextvars(None, "info", event_dict)
        event_dict["level"] = "info"
        if "run_id" not in event_dict:
            event_dict["run_id"] = STATE.run_id
        event_dict["timestamp"] = self._stamp.now()
        self._write_line(_json_line(event_dict))

    def emit(self, method_name: str, event: str, event_dict: dict[str, Any]) -> None:
        """:func:`emit` with this chain writing to a file: the logger's steps
        for the same event, without its dispatch, and one ``write``.

        What the bound logger and ``__call__`` do, in the same order (the
        same line, key for key): ``event``, the context variables, the level
        (the caller gives its own name), ``run_id`` unless the event has one,
        the timestamp; then the line is rendered and written. Once the
        processors were swapped (``capture_logs``), or for an ``exc_info``,
        the event takes the logger's way.
        """
        chain = self._chain
        if len(chain) != 1 or chain[0] is not self or "exc_info" in event_dict:
            return STATE.logger.log_dict(method_name, event, event_dict)
        event_dict["event"] = event
        _merge_contextvars(None, method_name, event_dict)
        event_dict["level"] = method_name
        if "run_id" not in event_dict:
            event_dict["run_id"] = STATE.run_id
        event_dict["timestamp"] = self._stamp.now()
        self._write_line(_json_line(event_dict))

    def _write_line(self, line: bytes) -> None:
        # One write call; after a short one (a signal, a nearly full disk), the rest.
        try:
            if (written := _write(self._fd, line)) < len(line):
                _write_rest(lambda rest: _write(self._fd, rest), line, written)
        except OSError as exc:  # a full disk, say: the error names the file
            raise _named(exc, self._path) from exc


# Attached to no chain: its emit() and emit_turn() hand every event to
# STATE.logger (see _route_through_logger).
_TO_LOGGER = _JsonLine(text=False)
_route_through_logger()


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


def disable_logging() -> None:
    """Stop logging: the log file :func:`configure_logging` opened is closed
    (every line already written stays), structlog is back to its defaults,
    and the runtime is silent below warning again, as before any configuration.
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
