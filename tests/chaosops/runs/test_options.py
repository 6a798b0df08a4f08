"""Each option is declared once: its flag and its run-file key accept and
refuse the same values, and take them to the same value."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest
from pydantic import ValidationError

from chaosops.cli._declare import arg_type
from chaosops.cli._run_file import ENTRIES, RunFile
from chaosops.runs.kinds import kind_named
from chaosops.runs.options import OPTIONS, Option
from chaosops.runs.spec import RunSpec
from chaosops.runs.values import _parts

NUMBERS = (-1, 0, 1, 2, 3, 19, 20, 21, 64, 100, 101, 1000, 1001, 1024, 100_000, 100_001,
           1_000_000, 1_000_001, 1 << 30, (1 << 30) + 1, 65535, 65536, 0.0, 0.5, 1.0, 1.5,
           2.0, 2.5, -0.5, 1e-9)  # fmt: skip
TEXTS = ("", "x", "a b", "ok-name.1", "easy", "hard", "Easy", "sre", "dev", "db_deadlock",
         "cascade", "auto", "json", "tools", "system", "user", "50%", "0%", "101%", "5", "0",
         "heuristic", "turn", "episode", "http://127.0.0.1:8000/v1")  # fmt: skip
BODIES = ({}, {"top_k": 5}, {"model": "m"}, {"n": 2, "top_k": 1})
CHECKED = [o for o in OPTIONS if o.kind is not None and not o.switch and (o.file_key or o.sets)]


def _candidates(option: Option) -> tuple[Any, ...]:
    base = _parts(option.kind)[0]
    if base in (int, float):
        return (*NUMBERS, "x")
    if option.dest == "llm_extra_body":
        return BODIES
    if option.dest == "max_policy_errors":
        return (*NUMBERS, *TEXTS)
    return TEXTS


def _flag(option: Option, value: Any) -> tuple[bool, Any]:
    text = json.dumps(value) if isinstance(value, dict) else str(value)
    if option.by_role:
        text = f"dev={text}"
    try:
        taken = arg_type(option)(text)  # type: ignore[misc]
    except argparse.ArgumentTypeError:
        return False, None
    return True, taken[1] if option.by_role else taken


def _file(option: Option, value: Any) -> tuple[bool, Any]:
    if option.sets is not None:  # a key of the kind's [KIND.NAME] tables
        kind, key = option.sets
        model, data = ENTRIES[kind], {"model": "m", key: value}
    else:
        given = {"dev": value} if option.by_role else [value] if option.repeatable else value
        model, data, key = RunFile, {option.file_key: given}, option.file_key
    try:
        taken = getattr(model.model_validate(data), key)  # type: ignore[arg-type]
    except ValidationError:
        return False, None
    if option.by_role:
        return True, taken["dev"]
    return True, taken[0] if option.repeatable else taken


def test_every_option_with_a_value_is_walked() -> None:
    assert len(CHECKED) >= 25
    assert {"temperature", "max_tokens", "llm_top_logprobs", "max_policy_errors"} <= {
        o.dest for o in CHECKED
    }


@pytest.mark.parametrize("option", CHECKED, ids=lambda o: o.dest)
def test_the_flag_and_the_run_file_accept_and_refuse_the_same_values(option: Option) -> None:
    accepted = 0
    for value in _candidates(option):
        by_flag, by_file = _flag(option, value), _file(option, value)
        assert by_flag == by_file, (option.dest, value, by_flag, by_file)
        accepted += by_flag[0]
    assert 0 < accepted < len(_candidates(option)), option.dest  # each refuses something


@pytest.mark.parametrize("option", [o for o in CHECKED if o.sets], ids=lambda o: o.dest)
def test_a_model_settings_bounds_are_its_kinds_settings_own(option: Option) -> None:
    kind, key = option.sets  # type: ignore[misc]
    for value in _candidates(option):
        flag_ok = _flag(option, value)[0]
        try:
            kind_named(kind).settings(**{"model": "m", key: value})
            settings_ok = True
        except ValueError:
            settings_ok = False
        if flag_ok:  # what the flag takes, the settings take (they may also read text)
            assert settings_ok, (option.dest, value)


def test_defaults_are_declared_once() -> None:
    defaults = {o.dest: o.initial for o in OPTIONS}
    run = RunSpec(policies=("heuristic",))
    assert defaults["concurrency"] == run.concurrency
    assert defaults["llm_max_failures"] == run.llm_max_failures
    for option in OPTIONS:
        if option.sets is None or option.sets[1] in ("model", "base_url"):
            continue
        kind, key = option.sets
        settings = kind_named(kind).settings(model="m")
        assert option.initial == getattr(settings, key), option.dest
