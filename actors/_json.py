"""JSON for log lines and output files.

orjson writes what it takes; msgspec, with the same conversions, what orjson
refuses (a set, bytes, a key that is not a string, an int past 64 bits, a
named tuple); :func:`json_safe` what neither can hold. A line is never lost.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import os
import uuid
from typing import Any

import msgspec
import orjson

_OPTIONS = orjson.OPT_UTC_Z  # an aware UTC datetime ends in Z, as msgspec writes it
_MAX_DEPTH = 64  # json_safe's nesting limit: deeper values are cut


def to_jsonable(value: Any) -> Any:
    """What neither encoder writes itself: a pydantic model's dump, a path, an
    exception's ``"Type: message"``, anything else its ``repr``."""
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return dump(mode="json")
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    return repr(value)


def _orjson_default(value: Any) -> Any:
    # Converted here only what msgspec would not write either; the rest is
    # left to msgspec (TypeError), which writes sets, bytes, Decimal... itself.
    if getattr(value, "model_dump", None) is not None or isinstance(
        value, os.PathLike | BaseException
    ):
        return to_jsonable(value)
    raise TypeError


_MSGSPEC = msgspec.json.Encoder(enc_hook=to_jsonable)


def dumps(value: Any, **_: Any) -> bytes:
    """``value`` as JSON bytes (structlog's ``JSONRenderer`` serializer)."""
    try:
        return orjson.dumps(value, default=_orjson_default, option=_OPTIONS)
    except TypeError:
        pass
    try:
        return _MSGSPEC.encode(value)
    except Exception:  # a lone surrogate, a cycle: see json_safe
        return orjson.dumps(json_safe(value), default=repr, option=_OPTIONS)


def dumps_text(value: Any, **_: Any) -> str:
    """:func:`dumps` as text, for a text stream."""
    return dumps(value).decode()


def json_safe(value: Any) -> Any:
    """``value`` with what no JSON encoder takes replaced, for a line that must
    still be written when encoding it failed:

    - a string that is not valid UTF-8 (a lone surrogate, such as
      ``json.loads('"\\ud800"')`` gives) has those characters escaped;
    - a container that holds itself is cut at the repetition (``"<cycle>"``),
      nesting deeper than 64 levels at that depth (``"<too deep>"``);
    - a key that is not a string becomes its ``str``; an integer past 64
      bits, its decimal string; an enum its value; anything else what
      :func:`to_jsonable` makes of it.

    Costs a walk of the whole value: for the failure path, not every line.
    """
    return _safe(value, 0, set())


def _safe(value: Any, depth: int, seen: set[int]) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode()
    if value is None or isinstance(value, bool | float):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**64 else str(value)
    if isinstance(value, enum.Enum):
        return _safe(value.value, depth, seen)
    if depth >= _MAX_DEPTH:
        return "<too deep>"
    if isinstance(value, dict | list | tuple | set | frozenset):
        return _safe_container(value, depth, seen)
    if isinstance(value, datetime.date | datetime.time | uuid.UUID):
        return value  # orjson writes these itself
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name, None) for f in dataclasses.fields(value)}
        return _safe(fields, depth, seen)
    try:
        converted = to_jsonable(value)
    except Exception:  # a model that cannot dump itself, a repr that raises
        return f"<{type(value).__name__}>"
    return _safe(converted, depth + 1, seen)


def _safe_container(value: Any, depth: int, seen: set[int]) -> Any:
    if id(value) in seen:
        return "<cycle>"
    seen.add(id(value))
    try:
        if isinstance(value, dict):
            return {
                _safe(str(key), depth, seen): _safe(item, depth + 1, seen)
                for key, item in value.items()
            }
        return [_safe(item, depth + 1, seen) for item in value]
    finally:
        seen.discard(id(value))
