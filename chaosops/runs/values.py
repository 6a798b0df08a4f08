"""The command line's value types: each turns one argument into a value, or
says in one line what it accepts (argparse shows it as the option's error)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BeforeValidator, Field, TypeAdapter, ValidationError

from chaosops.agents.policies import SCRIPTED
from chaosops.env.models import FailureType

from .kinds import KIND_NAMES

Role = Literal["sre", "oversight", "dev", "manager"]
Tier = Literal["easy", "medium", "hard"]
POLICIES: tuple[str, ...] = (*SCRIPTED, *KIND_NAMES)
ROLES: tuple[str, ...] = get_args(Role)
TIERS: tuple[str, ...] = get_args(Tier)


def _parts(value: Any) -> tuple[Any, list[Any], str | None]:
    """An annotation's base type, its constraints and its description (``X | None``: X's)."""
    value = _given(value)
    if get_origin(value) is not Annotated:
        return value, [], None
    base, *extra = get_args(value)
    found: list[Any] = []
    text = None
    for item in extra:
        found.extend(getattr(item, "metadata", [item]))
        text = getattr(item, "description", None) or text
    return base, found, text


def _given(value: Any) -> Any:
    """``X`` of ``X | None``; other annotations as they are."""
    if get_origin(value) in (Union, UnionType):
        kept = [arg for arg in get_args(value) if arg is not type(None)]
        return Union[tuple(kept)] if len(kept) > 1 else kept[0]  # noqa: UP007 - built at run time
    return value


def describe(value: Any) -> str:
    """What a value of the annotation ``value`` is, in words: ``an integer from 1
    to 1000``, ``a number in (0, 1]``, ``one of system, user``..."""
    base, constraints, text = _parts(value)
    if text:
        return text
    if get_origin(base) is Literal:
        return "one of " + ", ".join(map(str, get_args(base)))
    names = ("ge", "gt", "le", "lt")
    bounds = {n: getattr(c, n) for c in constraints for n in names if hasattr(c, n)}
    noun = "an integer" if base is int else "a number"
    low, high = bounds.get("ge"), bounds.get("le")
    if "gt" in bounds:
        return (
            f"{noun} in ({bounds['gt']}, {high}]"
            if high is not None
            else f"{noun} > {bounds['gt']}"
        )
    if low is not None and high is not None:
        return f"{noun} from {low} to {high}"
    if low is not None:
        return f"{noun} >= {low}"
    if base is str:
        return (
            "a non-empty text"
            if any(getattr(c, "min_length", 0) for c in constraints)
            else "a text"
        )
    return noun if base in (int, float) else "a value"


def refusal(exc: ValidationError) -> str | None:
    """The reason a validator of ours gave (its ValueError's words), if one did."""
    for error in exc.errors():
        if error["type"] == "value_error":
            return str(error.get("ctx", {}).get("error", error["msg"]))
    return None


def _text_of(value: Any) -> Callable[[str], Any]:
    """How a flag's text becomes the value's input: a number as Python reads one."""
    base = _parts(value)[0]
    return {int: int, float: float}.get(base, str)


def flag_type(value: Any, parse: Callable[[str], Any] | None = None) -> Callable[[str], Any]:
    """An argparse type that reads the flag's text (``parse``, default: a number
    as Python reads one) and validates it as the annotation ``value``, exactly
    as a run file's value is validated (strictly)."""
    value = _given(value)  # a flag that is given has a value: never None
    adapter = TypeAdapter(value)
    read = parse or _text_of(value)
    expected = describe(value)

    def convert(text: str) -> Any:
        try:
            return adapter.validate_python(read(text), strict=True)
        except ValidationError as exc:
            why = refusal(exc)
            said = f"expected {expected}, got {text!r}" + (f": {why}" if why else "")
            raise argparse.ArgumentTypeError(said) from None
        except (ValueError, TypeError):  # the text did not read as a value at all
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None

    return convert


Seconds = Annotated[
    float, Field(gt=0, allow_inf_nan=False, description="a positive number of seconds")
]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
Port = Annotated[int, Field(ge=0, le=65535)]
MAX_EPISODES_PER_TYPE = 100_000
"""The largest ``--episodes-per-type`` (as a suite entry's ``count``)."""

EpisodesPerType = Annotated[int, Field(ge=1, le=MAX_EPISODES_PER_TYPE)]
Samples = Annotated[int, Field(ge=1, le=1000)]
Name = Annotated[
    str,
    Field(pattern=r"^[A-Za-z0-9_.+=-]+$", description="ASCII letters, digits and _ . + = - only"),
]
FailureName = Literal[tuple(f.value for f in FailureType)]  # type: ignore[valid-type]


def _error_limit(value: Any) -> int | float:
    """``N`` (errors in a row, >= 1) or ``"P%"`` (a share of the turns, in (0, 100])."""
    if isinstance(value, str):
        text = value.strip()
        share = float(text[:-1]) / 100 if text.endswith("%") else None
        if share is not None and 0 < share <= 1:
            return share
        value = int(text) if share is None else 0
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise ValueError("expected a count >= 1 or a share such as 50%")


ErrorLimit = Annotated[
    int | float | str,
    BeforeValidator(_error_limit),
    Field(description="a count >= 1 (errors in a row) or a share such as 50%"),
]


def json_text(text: str) -> Any:
    """A flag's JSON text, read."""
    return json.loads(text)


PolicyName = Annotated[str, Field(min_length=1, description="a policy's name")]


positive_int = flag_type(PositiveInt)
port = flag_type(Port)
non_negative_int = flag_type(NonNegativeInt)
seconds = flag_type(Seconds)
non_negative = flag_type(NonNegative)


def run_file(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a run file path (.toml), got an empty one")
    return Path(text)


def by_role(value: Any) -> Callable[[str], tuple[str, Any]]:
    """An argparse type for ``ROLE=VALUE``: a role, and its value validated as
    the annotation ``value`` (a run file's role tables take the same)."""
    convert = flag_type(value)
    expected = f"ROLE=VALUE with ROLE one of {', '.join(ROLES)} and VALUE {describe(value)}"

    def parse(text: str) -> tuple[str, Any]:
        role, sep, given = text.partition("=")
        if not sep or role not in ROLES:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        try:
            return role, convert(given)
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None

    return parse


def folder(text: str) -> Path:
    """An output folder: a non-empty path (an empty one would mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a folder path, got an empty one")
    return Path(text)


def policy_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    bad = [name for name in names if name not in POLICIES and ":" not in name]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"unknown policy {', '.join(map(repr, bad)) or repr(text)}; "
            f"choose from {', '.join(POLICIES)} or module:attribute (comma separated)"
        )
    if twice := sorted({name for name in names if names.count(name) > 1}):
        raise argparse.ArgumentTypeError(
            f"{', '.join(map(repr, twice))} listed twice; each policy once"
        )
    return names
