"""An output folder has one writer at a time, the JSON log never lands in a run's
output files, and a write that fails mid-run (a full disk) is one error line
that keeps what finished for ``--resume``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import pytest

from ._cli import TINY, assert_one_error_line, chaosops, finished_run, jsonl, snapshot

fcntl = pytest.importorskip("fcntl")  # the folder's lock is POSIX flock


@pytest.fixture(scope="module")
def finished(work: Path) -> Path:
    return finished_run(work, "finished")[0]


def test_a_folder_another_run_writes_to_is_refused(finished: Path, work: Path) -> None:
    """Another process holding the folder's lock (a run in progress) turns a
    second run, and a --resume, away; nothing in the folder changes."""
    out = work / "in-use"
    shutil.copytree(finished, out)
    before = snapshot(out)
    starting = work / "in-use-starting"  # a run that has not finished an episode yet
    starting.mkdir()
    (starting / "results.jsonl").touch()
    for folder, extra in ((out, ("--resume",)), (starting, ()), (starting, ("--resume",))):
        kept = snapshot(folder)
        with open(folder / "results.jsonl", "ab") as held:
            fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            proc = chaosops("run", *TINY, "--out", folder, *extra, cwd=work)
        assert_one_error_line(proc, str(folder), "in use by another chaosops run", "--out")
        assert proc.returncode == 2
        assert snapshot(folder) == kept
    # the lock gone (that run ended, however it ended): the resume goes on
    proc = chaosops("run", *TINY, "--out", out, "--resume", cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert "2 of 2 episodes already done" in proc.stderr
    assert snapshot(out)["results.jsonl"] == before["results.jsonl"]


def test_the_log_file_cannot_be_an_output_of_this_or_another_run(
    finished: Path, work: Path
) -> None:
    before = snapshot(finished)
    new = work / "log-into-outputs"
    cases = (
        # this run's own files, before the folder exists and in a resumed run
        ((*TINY, "--out", new, "--log-json", new / "results.jsonl"), "this command's own"),
        ((*TINY, "--out", new, "--log-json", new / "trajectories.jsonl"), "this command's own"),
        (
            (*TINY, "--out", finished, "--resume", "--log-json", finished / "summary.json"),
            "this command's own",
        ),
        # an output file of an earlier run, by any path
        ((*TINY, "--out", new, "--log-json", finished / "results.jsonl"), "output file of"),
        (
            (*TINY, "--out", new, "--log-json", finished / ".." / finished.name / "run.json"),
            "output file of",
        ),
    )
    for args, needle in cases:
        proc = chaosops("run", *args, cwd=work)
        assert_one_error_line(proc, "--log-json", needle, "log to another file")
        assert proc.returncode == 2
        assert not new.exists()
        assert snapshot(finished) == before
    # eval: its JSON table is not a log file either
    table = work / "eval-table.json"
    proc = chaosops(
        "eval", *TINY, "--policies", "random", "--no-chart", "--json", table,
        "--log-json", table, cwd=work,
    )  # fmt: skip
    assert_one_error_line(proc, "--log-json", "this command's own output file")
    assert not table.exists()
    # a file of that name in a folder that holds no run is an ordinary log file
    plain = work / "plain-logs"
    plain.mkdir()
    proc = chaosops("run", *TINY, "--out", work / "logged", "--log-json", plain / "run.json",
                    cwd=work)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert any(line["event"] == "turn" for line in jsonl(plain / "run.json"))


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_log_on_a_full_disk_is_one_line_and_the_run_resumes(work: Path) -> None:
    out = work / "full-log"
    proc = chaosops("run", *TINY, "--out", out, "--log-json", "/dev/full", cwd=work)
    line = assert_one_error_line(proc, "/dev/full", "No space left on device", "--resume")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "ExceptionGroup" not in line
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["complete"] is False and summary["planned"] == 2
    # with a log that can be written, the same folder finishes
    log = work / "full-log.jsonl"
    proc = chaosops("run", *TINY, "--out", out, "--resume", "--log-json", log, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert orjson.loads((out / "summary.json").read_bytes())["complete"] is True
    turns = [line for line in jsonl(log) if line["event"] == "turn"]
    assert len(turns) == len(jsonl(out / "trajectories.jsonl"))


def test_options_before_the_command_name_the_mistake(work: Path) -> None:
    proc = chaosops("--policy", "oracle", cwd=work)
    assert_one_error_line(proc, "--policy comes after a command", "run, eval")
    assert proc.returncode == 2


def test_a_resumed_run_does_not_claim_it_wrote_run_json(finished: Path, work: Path) -> None:
    out = work / "resumed-note"
    shutil.copytree(finished, out)
    proc = chaosops("run", *TINY, "--out", out, "--resume", cwd=work)
    assert proc.returncode == 0, proc.stderr
    wrote = [line for line in proc.stderr.splitlines() if "wrote" in line]
    assert len(wrote) == 1 and "summary.json" in wrote[0] and "run.json" not in wrote[0]


def test_a_log_path_in_a_symlink_loop_is_one_line(work: Path) -> None:
    loop = work / "loopy"
    loop.symlink_to(loop.name)
    proc = chaosops("run", *TINY, "--out", work / "looped", "--log-json", loop, cwd=work)
    assert_one_error_line(proc, "--log-json", "loopy")
    assert proc.returncode == 1 and not (work / "looped").exists()
