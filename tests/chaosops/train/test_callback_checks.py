"""EvalCallback refuses at once what its first evaluation would refuse: one
ValueError each, naming the argument and what it accepts."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("transformers", reason="the train extra is not installed")

from chaosops.curriculum.generator import scenarios_for_tier
from chaosops.train.callback import EvalCallback

SCENARIOS = scenarios_for_tier("easy")[:2]


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"role": "ceo"}, "role='ceo': one of sre"),
        ({"role": ["dev", "ceo"]}, "role=['dev', 'ceo']: one of sre"),
        ({"role": []}, "role=[]: one of sre"),
        ({"samples": 0}, "samples=0: a whole number from 1"),
        ({"every": 0}, "every=0: a whole number from 1"),
        ({"scenarios": ["easy"]}, "'easy' is no Scenario"),
        ({"scenarios": "easy"}, "'easy' is no Scenario"),
        ({"scenarios": []}, "none given"),
        ({"max_new_tokns": 8}, "max_new_tokns=: no such setting"),
        ({"max_new_tokens": 0}, "settings:"),
    ],
)
def test_a_bad_argument_is_one_value_error_when_built(given: dict, said: str) -> None:
    arguments = {"scenarios": SCENARIOS, **given}
    with pytest.raises(ValueError, match=re.escape(said)):
        EvalCallback(None, **arguments)


def test_good_arguments_are_taken() -> None:
    callback = EvalCallback(None, SCENARIOS, every=5, role="dev", samples=2, max_new_tokens=16,
                            turn_timeout=5.0, concurrency=4)  # fmt: skip
    assert callback.role == "dev" and callback.samples == 2
    assert EvalCallback(None, SCENARIOS, role=["sre", "dev"]).role == ["sre", "dev"]
