"""The run record (run.json) has a schema, made from the options' table: what
a run writes validates, and a record edited out of it is one line on --resume."""

from __future__ import annotations

from pathlib import Path

import orjson

from chaosops.runs.folder import RunRecord
from chaosops.runs.options import RECORDED

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
