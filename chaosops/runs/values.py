"""The command line's value types: each turns one argument into a value, or
says in one line what it accepts (argparse shows it as the option's error)."""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chaosops.agents.llm.settings import OWN_REQUEST_FIELDS
from chaosops.agents.policies import SCRIPTED
from chaosops.env.models import FailureType

POLICIES: tuple[str, ...] = (*SCRIPTED, "llm")
ROLES: tuple[str, ...] = ("sre", "oversight", "dev", "manager")
TIERS: tuple[str, ...] = ("easy", "medium", "hard")
ANSWERS: tuple[str, ...] = ("auto", "json", "json_object", "tools", "text")


def positive_seconds(value: float) -> float:
    """A run file's seconds: finite and positive."""
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"expected a positive number of seconds, got {value!r}")
    return value


def int_from(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer >= ``low`` (and <= ``high`` when given)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if high is not None and not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"expected an integer from {low} to {high}, got {text!r}"
            )
        if value < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}")
        return value

    return parse


positive_int = int_from(1)
port = int_from(0, 65535)
non_negative_int = int_from(0)

MAX_EPISODES_PER_TYPE = 100_000
"""The largest ``--episodes-per-type`` (as a suite entry's ``count``)."""

episodes_per_type = int_from(1, MAX_EPISODES_PER_TYPE)


def integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            f"expected a JSON object such as '{{\"return_token_ids\": true}}', got {text!r}"
        )

    if taken := sorted(OWN_REQUEST_FIELDS & set(value)):
        raise argparse.ArgumentTypeError(
            f"cannot set {', '.join(map(repr, taken))}: the LLM policy sets these itself "
            "(--llm-model for the model)"
        )
    return value


def _number(accepts: Callable[[float], bool], expected: str) -> Callable[[str], float]:
    """An argparse type: a finite number that ``accepts`` takes."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and accepts(value)):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


seconds = _number(lambda v: v > 0, "a positive number of seconds")
non_negative = _number(lambda v: v >= 0, "a number >= 0")
share = _number(lambda v: 0 < v <= 1, "a number in (0, 1]")


def error_limit(text: str) -> int | float:
    """``N`` (errors in a row, >= 1) or ``P%`` (a share of the turns, in (0, 100])."""
    value = text.strip()
    try:
        if value.endswith("%"):
            share = float(value[:-1]) / 100
            if 0 < share <= 1:
                return share
        elif int(value) >= 1:
            return int(value)
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(
        f"expected a count >= 1 (errors in a row) or a share such as 50%, got {text!r}"
    )


def run_file(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a run file path (.toml), got an empty one")
    return Path(text)


def role_timeout(text: str) -> tuple[str, float]:
    role, sep, seconds = text.partition("=")
    role = role.strip().lower()
    if not sep or role not in ROLES:
        raise argparse.ArgumentTypeError(
            f"expected ROLE=SECONDS with ROLE one of {', '.join(ROLES)}, got {text!r}"
        )
    try:
        value = float(seconds)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(
            f"expected ROLE=SECONDS with a positive number of seconds, got {text!r}"
        )
    return role, value


def failure_type(text: str) -> str:

    accepted = [f.value for f in FailureType]
    value = text.strip().lower()
    if value not in accepted:
        raise argparse.ArgumentTypeError(
            f"unknown failure type {text!r}; choose from {', '.join(accepted)}"
        )
    return value


def role_policy(text: str) -> tuple[str, str]:
    role, sep, policy = text.partition("=")
    role, policy = role.strip().lower(), policy.strip()
    if not sep or role not in ROLES or not policy:
        raise argparse.ArgumentTypeError(
            f"expected ROLE=POLICY with ROLE one of {', '.join(ROLES)} and POLICY one of "
            f"{', '.join(POLICIES)} or module:attribute, got {text!r}"
        )
    return role, policy


def name(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.+=-]+", text):
        raise argparse.ArgumentTypeError(
            f"expected ASCII letters, digits and _ . + = - only, got {text!r}"
        )
    return text


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
