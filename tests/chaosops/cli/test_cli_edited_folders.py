"""Folders edited by hand, and the words a refusal uses: run.json with a field no
run writes, a results line whose reward is text, run.json and results that
disagree, an eval resumed with other policies, and Python's keywords."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from chaosops.agents.policies import heuristic_policy
from chaosops.env.environment import DEFAULT_TURN_ORDER
from chaosops.env.models import FailureType
from chaosops.env.world_sim import Scenario
from chaosops.runs import RunError, run_to_folder

from ._cli import assert_one_error_line, chaosops, finished_run, snapshot


def _edited(work: Path, name: str, edit) -> Path:
    run = work / "edited-source"
    if not run.exists():
        finished_run(work, run.name)
    out = work / name
    shutil.copytree(run, out)
    edit(out)
    return out


def _edit_record(**changes):
    def edit(out: Path) -> None:
        record = orjson.loads((out / "run.json").read_bytes())
        (out / "run.json").write_bytes(orjson.dumps({**record, **changes}))

    return edit


def _reward_as_text(out: Path) -> None:
    lines = (out / "results.jsonl").read_bytes().splitlines()
    first = orjson.loads(lines[0])
    first["cumulative_reward"] = str(first["cumulative_reward"])
    (out / "results.jsonl").write_bytes(b"\n".join([orjson.dumps(first), *lines[1:]]) + b"\n")


@pytest.mark.parametrize(
    ("name", "edit", "needles"),
    [
        ("unknown-field", _edit_record(bogus=1), ("run.json: bogus: no field of a run record",)),
        ("edited-policy", _edit_record(policy="oracle"),
         ("results.jsonl holds episodes of heuristic", "run.json records oracle")),
        ("text-reward", _reward_as_text,
         ("results.jsonl: line 1: cumulative_reward: expected a number",)),
    ],
)  # fmt: skip
def test_an_edited_folder_is_refused_naming_the_file(work: Path, name, edit, needles) -> None:
    out = _edited(work, name, edit)
    before = snapshot(out)
    resumed = chaosops("run", "--resume", "--out", out, "--no-progress", cwd=work)
    line = assert_one_error_line(resumed, *needles)
    assert "given" not in line  # nothing was given on the command line
    assert snapshot(out) == before


def test_eval_resumed_with_other_policies_names_those_it_played(work: Path) -> None:
    common = ("eval", "tiny.toml", "--no-progress", "--no-chart", "--out", work / "ev")
    first = chaosops(*common, "--policies", "heuristic,random", cwd=work)
    assert first.returncode == 0, first.stderr
    refused = chaosops(*common, "--policies", "heuristic,oracle", "--resume", cwd=work)
    assert_one_error_line(refused, "played heuristic, random, not oracle",
                          "--policies heuristic,random")  # fmt: skip
    advised = chaosops(*common, "--policies", "heuristic,random", "--resume", cwd=work)
    assert advised.returncode == 0, advised.stderr


def test_python_callers_read_keywords_not_flags(tmp_path: Path) -> None:
    scenarios = [Scenario.from_type(FailureType.DB_DEADLOCK, seed=0, difficulty="easy")]
    policies = dict.fromkeys(DEFAULT_TURN_ORDER, heuristic_policy())
    run_to_folder(tmp_path / "py", scenarios, policies, log=False)
    refusals = [
        ({}, "pass resume=True to continue that run, or a new out folder"),
        ({"resume": True, "name": "other"}, "resume=True: name differs"),
    ]
    for keywords, needle in refusals:
        with pytest.raises(RunError) as raised:
            run_to_folder(tmp_path / "py", scenarios, policies, log=False, **keywords)
        assert needle in str(raised.value) and " --" not in str(raised.value)
    with pytest.raises(RunError, match="run without resume=True"):
        run_to_folder(tmp_path / "none", scenarios, policies, log=False, resume=True)
