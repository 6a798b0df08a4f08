"""A policy that keeps failing, whatever its kind, fails the run: at once with
--max-policy-errors, and at the end when a role never played a move of its own."""

from __future__ import annotations

from pathlib import Path

import orjson

from ._cli import assert_one_error_line, chaosops

BOOM = """\
def boom(observation, role):
    raise RuntimeError("no model behind this policy")
"""


def test_a_policy_that_fails_every_turn_fails_the_run(work: Path) -> None:
    (work / "boompol.py").write_text(BOOM)
    out = work / "boom"
    proc = chaosops("run", "tiny.toml", "--episodes-per-type", "1", "--no-progress",
                    "--role-policy", "sre=boompol:boom", "--out", out, cwd=work)  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    [line] = [x for x in proc.stderr.splitlines() if "never played a move of its own" in x]
    assert "the sre (boompol:boom)" in line and "failed" in line


def test_max_policy_errors_stops_the_run_in_a_row_or_by_share(
    work: Path, canonical_size: int
) -> None:
    (work / "boompol.py").write_text(BOOM)
    out = work / "stopped"
    proc = chaosops("run", "--no-progress", "--concurrency", "1", "--policy", "boompol:boom",
                    "--max-policy-errors", "3", "--out", out, cwd=work)  # fmt: skip
    line = assert_one_error_line(proc, "turns in a row failed with a policy error",
                                 "no model behind this policy", "--max-policy-errors 3",
                                 f"chaosops run --resume --out {out}")  # fmt: skip
    assert proc.returncode == 1, line
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["complete"] is False and summary["episodes"] < canonical_size
    assert orjson.loads((out / "run.json").read_bytes())["max_policy_errors"] == 3
    shared = chaosops("run", "--no-progress", "--concurrency", "1", "--policy", "boompol:boom",
                      "--max-policy-errors", "50%", "--out", work / "share", cwd=work)  # fmt: skip
    assert_one_error_line(shared, "turns failed with a policy error (last: manager",
                          "--max-policy-errors 50%")  # fmt: skip
    bad = chaosops("run", "--max-policy-errors", "0", cwd=work)
    assert bad.returncode == 2
    assert_one_error_line(bad, "--max-policy-errors", "a count >= 1", "50%", "'0'")
