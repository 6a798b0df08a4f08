"""Bounds on what a run plans, output targets checked before anything is
written or run, ``eval`` stopped by Ctrl-C, and a run whose stdout is closed."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from . import _cli
from ._cli import (
    TIMEOUT,
    assert_one_error_line,
    chaosops,
    cli_env,
    finished_run,
    interrupt,
    jsonl,
    snapshot,
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


BAD_SUITES = {
    "negative-seed": ("scenarios[0].seeds[0]", "(got -1)", "from 0 to 9223372036854775807"),
    "seed-past-64-bits": ("scenarios[0].seeds[0]", "from 0 to 9223372036854775807"),
    "huge-max-steps": ("scenarios[0].max_steps", "from 1 to 10000"),
    "infinite-timeout": ("scenarios[0].turn_timeout.manager", "finite number of seconds > 0"),
    "seed-step-with-seeds": ("scenarios[0].seed_step", "seed_step goes with seed_start + count"),
}
_BAD_LINES = {
    "negative-seed": "seeds = [-1]\n",
    "seed-past-64-bits": "seeds = [99999999999999999999]\n",
    "huge-max-steps": "seeds = [1]\nmax_steps = 99999999999999999999\n",
    "infinite-timeout": "seeds = [1]\n[scenarios.turn_timeout]\nmanager = inf\n",
    "seed-step-with-seeds": "seeds = [1]\nseed_step = 2\n",
}


@pytest.mark.parametrize("case", sorted(BAD_SUITES))
def test_a_bad_suite_is_one_line_and_keeps_an_earlier_run(work: Path, case: str) -> None:
    # each once crashed with a traceback (a seed or max_steps past 64 bits) or
    # ran something the file did not mean (a negative seed, an infinite deadline,
    # a seed_step without effect)
    out = work / "kept-run"
    if not out.exists():
        finished_run(work, out.name)
    before = snapshot(out)
    head = 'name = "bad"\ndifficulty = "easy"\n[[scenarios]]\nfailure_type = "cascade"\n'
    (work / f"{case}.toml").write_text(head + _BAD_LINES[case])
    for command in (
        ("scenarios", f"{case}.toml"),
        ("run", f"{case}.toml", "--out", work / f"{case}-run"),
        ("run", f"{case}.toml", "--out", out, "--resume"),
        ("eval", f"{case}.toml", "--out", work / f"{case}-eval"),
    ):
        proc = chaosops(*command, cwd=work)
        assert proc.returncode == 2
        assert_one_error_line(proc, f"{case}.toml: ", *BAD_SUITES[case])
    assert snapshot(out) == before
    assert not (work / f"{case}-run").exists() and not (work / f"{case}-eval").exists()


def test_seed_offset_out_of_the_seed_range_is_one_line(work: Path) -> None:
    # tiny.toml's first seed is 0, and so is the first of --episodes-per-type
    for offset in ("-1", str(2**64)):
        for extra in ((), ("--episodes-per-type", "2")):
            out = work / "off-range"
            proc = chaosops(
                "run", "tiny.toml", "--seed-offset", offset, *extra, "--out", out, cwd=work
            )
            assert proc.returncode == 2
            assert_one_error_line(proc, f"--seed-offset {offset} gives seed ", "from 0 to")
            assert not out.exists()


def test_an_empty_path_or_a_dangling_link_in_a_folder_is_one_line(work: Path) -> None:
    # an empty argument once ran the suites of the current folder
    proc = chaosops("run", "", "--out", work / "empty-path", cwd=work)
    assert proc.returncode == 2
    assert_one_error_line(proc, "no such scenario file or folder: ''")
    assert not (work / "empty-path").exists()
    folder = work / "linked"
    folder.mkdir()
    (folder / "b.toml").write_text((work / "tiny.toml").read_text())
    (folder / "a.toml").symlink_to(work / "gone.toml")  # once skipped unseen
    for command in (("run", "linked", "--out", work / "linked-run"), ("scenarios", "linked")):
        proc = chaosops(*command, cwd=work)
        assert proc.returncode == 2
        assert_one_error_line(proc, "linked/a.toml: a link to a missing file")
    assert not (work / "linked-run").exists()


# ------------------------------------------------------ output targets up front


@pytest.mark.parametrize("command", ["run", "eval"])
def test_a_bad_log_target_writes_nothing(work: Path, command: str) -> None:
    (work / "afile").write_text("hi\n")
    out = work / f"badlog-{command}"
    proc = chaosops(
        command, "tiny.toml", "--log-json", "afile/l.json", "--no-progress", "--out", out, cwd=work
    )
    assert proc.returncode == 2
    assert_one_error_line(proc, "--log-json", "afile/l.json", "afile is a file, not a folder")
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
        (
            ("--json", "same.out", "--chart", "./same.out"),
            ("--json and --chart both name", "same.out"),
        ),
        (("--chart", "-"), ("--chart takes a file", "--json only")),
    ],
    ids=[
        "out-is-a-file",
        "json-parent-is-a-file",
        "chart-parent-is-a-file",
        "json-is-a-folder",
        "json-and-chart-one-file",
        "chart-to-stdout",
    ],
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


def test_a_closed_stdout_stops_the_printing_never_the_writing(work: Path) -> None:
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
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr and "the run went on" in stderr and "--resume" not in stderr
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["complete"] is True
    assert summary["episodes"] == len(jsonl(out / "results.jsonl")) == summary["planned"]


def test_an_eval_whose_reader_is_gone_writes_its_files_whole(work: Path) -> None:
    read, write = os.pipe()
    os.close(read)  # `chaosops eval ... | head -1`, the reader gone before the table
    proc = subprocess.run([_cli.command(), "eval", "tiny.toml", "--episodes-per-type", "1",
                           "--policies", "heuristic,random", "--out", "eval-gone"],
                          cwd=work, env=cli_env(), stdout=write, stderr=subprocess.PIPE,
                          text=True, timeout=TIMEOUT, check=False)  # fmt: skip
    os.close(write)
    assert proc.returncode in (0, 141) and "Traceback" not in proc.stderr, proc.stderr
    written = orjson.loads((work / "eval-gone" / "eval.json").read_bytes())
    assert written["complete"] is True and written["policies"] == ["heuristic", "random"]
    assert (work / "eval-gone" / "eval_reward_by_tier.png").stat().st_size > 0


@pytest.mark.parametrize("command", ["run", "eval"])
def test_an_empty_out_is_refused_not_the_current_folder(work: Path, command: str) -> None:
    before = sorted(p.name for p in work.iterdir())
    proc = chaosops(command, "tiny.toml", "--out", "", cwd=work)
    assert proc.returncode == 2
    assert_one_error_line(proc, "--out", "empty")
    assert sorted(p.name for p in work.iterdir()) == before
