"""The command line's value types: each turns one argument's text into a value,
validated as the run setting's annotation (:mod:`chaosops.runs.values`), or
says in one line what it accepts (argparse shows it as the option's error)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError

from chaosops.runs.values import (
    POLICIES,
    ROLES,
    NonNegative,
    NonNegativeInt,
    Port,
    PositiveInt,
    Seconds,
    base_of,
    describe,
    given,
    refusal,
)
from chaosops.runs.values import folder as _folder
from chaosops.runs.values import run_file as _run_file


def refusing(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` as an argparse type: its ValueError's words are the option's error."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = getattr(parse, "__name__", "value")
    return convert


def _text_of(value: Any) -> Callable[[str], Any]:
    """How a flag's text becomes the value's input: a number as Python reads one."""
    return {int: int, float: float}.get(base_of(value), str)


def flag_type(value: Any, parse: Callable[[str], Any] | None = None) -> Callable[[str], Any]:
    """An argparse type that reads the flag's text (``parse``, default: a number
    as Python reads one) and validates it as the annotation ``value``, exactly
    as a run file's value is validated (strictly)."""
    value = given(value)  # a flag that is given has a value: never None
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


positive_int = flag_type(PositiveInt)
port = flag_type(Port)
non_negative_int = flag_type(NonNegativeInt)
seconds = flag_type(Seconds)
non_negative = flag_type(NonNegative)
run_file = refusing(_run_file)
folder = refusing(_folder)


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
