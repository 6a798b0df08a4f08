"""The run settings' value types (pydantic annotations, each described in
words by :func:`describe`), and the few texts read as paths: a refused value
is a ValueError saying in one line what is accepted."""

from __future__ import annotations

import json
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BeforeValidator, Field, ValidationError

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
    value = given(value)
    if get_origin(value) is not Annotated:
        return value, [], None
    base, *extra = get_args(value)
    found: list[Any] = []
    text = None
    for item in extra:
        found.extend(getattr(item, "metadata", [item]))
        text = getattr(item, "description", None) or text
    return base, found, text


def given(value: Any) -> Any:
    """``X`` of ``X | None``; other annotations as they are."""
    if get_origin(value) in (Union, UnionType):
        kept = [arg for arg in get_args(value) if arg is not type(None)]
        return Union[tuple(kept)] if len(kept) > 1 else kept[0]  # noqa: UP007 - built at run time
    return value


def base_of(value: Any) -> Any:
    """An annotation's base type: ``int`` of ``Annotated[int, Field(ge=1)] | None``."""
    return _parts(value)[0]


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


def run_file(text: str) -> Path:
    """A run file's path, given as text: a non-empty one."""
    if not text.strip():
        raise ValueError("expected a run file path (.toml), got an empty one")
    return Path(text)


def folder(text: str) -> Path:
    """An output folder: a non-empty path (an empty one would mean the current folder)."""
    if not text.strip():
        raise ValueError("expected a folder path, got an empty one")
    return Path(text)
