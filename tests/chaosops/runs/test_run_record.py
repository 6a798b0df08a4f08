"""The run record (run.json) has a schema, made from the options' table: what
a run writes validates, and a record edited out of it is one line on --resume."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from chaosops.cli import build_parser
from chaosops.cli._config import config_from_args
from chaosops.cli._resume import fill_from_run_record
from chaosops.cli._run_file import apply_run_file
from chaosops.runs.folder import RunFolder, RunRecord, run_record
from chaosops.runs.options import RECORDED
from chaosops.runs.plan import plan_episodes
from chaosops.runs.spec import RunSpec

from ..cli._cli import assert_one_error_line, chaosops


def test_a_run_writes_a_record_of_its_schema_and_resume_refuses_a_damaged_one(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    first = chaosops("run", "--tier", "easy", "--limit", "3", "--no-progress", "--out", out,
                     cwd=tmp_path)  # fmt: skip
    assert first.returncode == 0, first.stderr
    record = orjson.loads((out / "run.json").read_bytes())
    RunRecord.model_validate(record)
    assert {o.recorded for o in RECORDED if o.recorded in record} >= {"policy", "concurrency"}
    assert set(record) <= set(RunRecord.model_fields)
    results = (out / "results.jsonl").read_bytes()
    for field, value in (("concurrency", "lots"), ("temperature", 9), ("tiers", ["lava"])):
        damaged = {**record, field: value}
        (out / "run.json").write_bytes(orjson.dumps(damaged))
        again = chaosops("run", "--resume", "--out", out, "--no-progress", cwd=tmp_path)
        assert again.returncode == 2, again.stderr
        assert_one_error_line(again, "run.json", field, "edited or damaged")
        assert (out / "results.jsonl").read_bytes() == results  # nothing lost


def _spec(argv: list[str]) -> RunSpec:
    """The spec ``chaosops run ARGV`` plays, merged as the command merges it."""
    args = build_parser().parse_args(["run", *argv])
    return config_from_args(fill_from_run_record(apply_run_file(args, argv), argv)).spec


RUN_FILE = """policy = "heuristic"
[roles]
dev = "g"
[llm.g]
model = "gemma"
base_url = "http://127.0.0.1:9/v1"
temperature = 0.3
max_tokens = 99
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["--tier", "easy", "--limit", "3"],
        ["--policy", "oracle", "--role-policy", "dev=random", "--episodes-per-type", "2",
         "--seed-offset", "5", "--failure-type", "db_deadlock", "--samples", "2",
         "--turn-timeout", "3", "--role-timeout", "sre=1.5", "--max-policy-errors", "10%",
         "--concurrency", "8", "--llm-max-failures", "3", "--name", "mine"],
        ["--policy", "llm", "--llm-model", "m", "--temperature", "0.5", "--max-tokens", "64",
         "--llm-base-url", "http://127.0.0.1:9/v1", "--top-p", "0.9", "--llm-seed", "7",
         "--llm-answer", "tools", "--llm-history", "2"],
        ["--config", "run.toml", "--role-policy", "sre=oracle"],
    ],
    ids=["subset", "players-and-pacing", "llm", "run-file"],
)  # fmt: skip
def test_a_runs_spec_comes_back_whole_from_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    """run.json is the spec: ``--resume --out D`` alone plays the spec that wrote D."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.toml").write_text(RUN_FILE)
    spec = _spec([*argv, "--out", "run"])
    folder = RunFolder(tmp_path / "run")
    folder.open()
    folder.write_record(run_record(spec, plan_episodes(spec)))
    folder.close()
    assert _spec(["--resume", "--out", "run"]) == spec
    assert _spec(["--resume", "--out", "run", "--seed-offset", "9"]) != spec  # it can differ
