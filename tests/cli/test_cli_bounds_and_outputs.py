"""Bounds on what a run plans, output targets checked before anything is
written or run, ``eval`` stopped by Ctrl-C, and a run whose stdout is closed."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from ._cli import (
    TIMEOUT,
    assert_one_error_line,
    chaosops,
    interrupt,
    jsonl,
    spawn,
)

HUGE_SUITE = """\
name = "huge"
difficulty = "easy"

[[scenarios]]
failure_type = "db_deadlock"
seed_start = 0
count = 1000000000000
"""

# ---------------------------------------------------------------------- bounds


def test_a_huge_count_in_a_suite_is_one_line(work: Path) -> None:
    (work / "huge.toml").write_text(HUGE_SUITE)
    for command in (("scenarios",), ("run", "--out", work / "huge-run")):
        proc = chaosops(*command, "huge.toml", cwd=work)
        assert proc.returncode == 2
        assert_one_error_line(proc, "huge.toml", "scenarios[0].count", "1 to 100000")
    assert not (work / "huge-run").exists()


def test_a_huge_suite_file_is_one_line(work: Path) -> None:
    entry = '[[scenarios]]\nfailure_type = "db_deadlock"\nseed_start = 0\ncount = 100000\n'
    (work / "wide.toml").write_text('name = "wide"\ndifficulty = "easy"\n' + entry * 11)
    proc = chaosops("scenarios", "wide.toml", cwd=work)
    assert proc.returncode == 2
    assert_one_error_line(proc, "wide.toml", "1100000 scenarios", "at most 1000000")


@pytest.mark.parametrize(
    ("count", "needles"),
    [
        ("1000000000000", ("--episodes-per-type", "1 to 100000", "1000000000000")),
        ("100000", ("--episodes-per-type 100000", "1100000 episodes", "at most 1000000")),
    ],
    ids=["over-the-entry-bound", "over-the-plan-bound"],
)
def test_huge_episodes_per_type_is_one_line(
    work: Path,
    count: str,
    needles: tuple[str, ...],
) -> None:
    for command in ("run", "eval"):
        out = work / f"huge-{command}-{count}"
        proc = chaosops(command, "--episodes-per-type", count, "--out", out, cwd=work)
        assert proc.returncode == 2
        assert_one_error_line(proc, *needles)
        assert not out.exists()


# ------------------------------------------------------ output targets up front


@pytest.mark.parametrize("command", ["run", "eval"])
def test_a_bad_log_target_writes_nothing(work: Path, command: str) -> None:
    (work / "afile").write_text("hi\n")
    out = work / f"badlog-{command}"
    proc = chaosops(
        command, "tiny.toml", "--log-json", "afile/l.json", "--no-progress", "--out", out, cwd=work
    )
    assert proc.returncode == 1
    assert_one_error_line(proc, "--log-json", "afile/l.json")
    assert not out.exists()
    rerun = chaosops(command, "tiny.toml", "--no-progress", "--out", out, cwd=work)
    assert rerun.returncode == 0, rerun.stderr


@pytest.mark.parametrize(
    ("extra", "needles"),
    [
        (("--out", "afile"), ("--out afile", "not a folder")),
        (("--json", "afile/x.json"), ("--json afile/x.json", "afile")),
        (("--chart", "afile/c.png"), ("--chart afile/c.png", "afile")),
        (("--json", "."), ("--json .", "is a folder")),
    ],
    ids=["out-is-a-file", "json-parent-is-a-file", "chart-parent-is-a-file", "json-is-a-folder"],
)
def test_eval_refuses_unwritable_outputs_before_running(
    work: Path,
    extra: tuple[str, ...],
    needles: tuple[str, ...],
) -> None:
    (work / "afile").write_text("hi\n")
    proc = chaosops("eval", "tiny.toml", "--log-json", "eval-refused.log", *extra, cwd=work)
    assert proc.returncode == 2
    assert_one_error_line(proc, *needles)
    assert not (work / "eval-refused.log").exists()  # nothing ran
    assert (work / "afile").read_text() == "hi\n"


# ------------------------------------------------------- eval stopped by Ctrl-C


def test_eval_interrupted_writes_the_finished_episodes(work: Path, mock_llm: str) -> None:
    out = work / "eval-interrupted"
    log = work / "eval-interrupted.log"
    proc = spawn(
        "eval", "tiny.toml", "--policies", "llm", "--llm-base-url", mock_llm,
        "--concurrency", "2", "--no-progress", "--no-chart", "--log-json", log,
        "--out", out, cwd=work,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + TIMEOUT
        while b"episode_finished" not in (log.read_bytes() if log.exists() else b""):
            assert proc.poll() is None and time.monotonic() < deadline, "no episode finished"
            time.sleep(0.02)
    finally:
        stderr = interrupt(proc)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    data = orjson.loads((out / "eval.json").read_bytes())
    assert data["complete"] is False
    assert 1 <= data["episodes"] < 12
    assert sum(row["episodes"] for row in data["rows"]) == data["episodes"]


# ------------------------------------------------------------ stdout closed


def test_closed_stdout_stops_the_run_and_keeps_it(work: Path) -> None:
    out = work / "stdout-closed"
    proc = spawn(
        "run", "--episodes-per-type", "20", "--policy", "oracle", "--log-json", "-",
        "--no-progress", "--out", out, cwd=work,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    try:
        assert proc.stdout.readline()
        proc.stdout.close()
        stderr = proc.stderr.read()
        proc.wait(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    assert proc.returncode == 141, stderr
    assert "Traceback" not in stderr and "stdout closed" in stderr
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["complete"] is False
    assert summary["episodes"] == len(jsonl(out / "results.jsonl"))
    resumed = chaosops(
        "run", "--episodes-per-type", "20", "--policy", "oracle", "--no-progress",
        "--resume", "--out", out, cwd=work,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
