"""Refusals that keep what was written: ``run --resume`` with other options than
the run in the folder, ``eval`` over an earlier evaluation, ``mock-llm`` on a
port already taken. Each is one error line and a non-zero exit."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from chaosops import mock_llm

from ._cli import (
    TINY,
    assert_one_error_line,
    chaosops,
    finished_run,
    snapshot,
)

# ---------------------------------------------------------------- run --resume


@pytest.fixture(scope="module")
def heuristic_run(work: Path) -> Path:
    """A finished heuristic run of the tiny suite, one episode per failure type."""
    out, proc = finished_run(work, "resume-heuristic")
    assert f"summary.json, {out / 'run.json'}" in proc.stderr  # the files written, all named
    return out


def test_run_records_its_options(heuristic_run: Path) -> None:
    options = orjson.loads((heuristic_run / "run.json").read_bytes())
    assert options["policy"] == "heuristic"
    assert options["paths"] == ["tiny.toml"]
    assert options["episodes_per_type"] == 1
    assert options["seed_offset"] == 0
    assert options["planned"] == 2


@pytest.mark.parametrize(
    ("extra", "needles"),
    [
        (("--policy", "oracle"), ("--policy", "recorded heuristic", "given oracle")),
        (("--episodes-per-type", "2"), ("--episodes-per-type", "recorded 1", "given 2")),
        (("--seed-offset", "5"), ("--seed-offset", "recorded 0", "given 5")),
        (("--turn-timeout", "3"), ("--turn-timeout", "recorded none", "given 3")),
        (("--role-timeout", "dev=2.5"), ("--role-timeout", "recorded none", "given dev=2.5")),
    ],
    ids=["policy", "episodes-per-type", "seed-offset", "turn-timeout", "role-timeout"],
)
def test_resume_with_other_options_is_refused(
    heuristic_run: Path,
    work: Path,
    extra: tuple[str, ...],
    needles: tuple[str, ...],
) -> None:
    before = snapshot(heuristic_run)
    base = list(TINY)
    if extra[0] in base:  # given once, with the other value
        del base[base.index(extra[0]) : base.index(extra[0]) + 2]
    proc = chaosops("run", *base, "--resume", "--out", heuristic_run, *extra, cwd=work)
    assert proc.returncode == 2
    assert_one_error_line(proc, "--resume", str(heuristic_run), *needles)
    assert snapshot(heuristic_run) == before


def test_resume_with_other_suites_is_refused(heuristic_run: Path, work: Path) -> None:
    (work / "other.toml").write_text(
        'name = "other"\ndifficulty = "easy"\n[[scenarios]]\n'
        'failure_type = "disk_full"\nseeds = [0]\n'
    )
    before = snapshot(heuristic_run)
    proc = chaosops(
        "run",
        "other.toml",
        "--episodes-per-type",
        "1",
        "--resume",
        "--out",
        heuristic_run,
        cwd=work,
    )
    assert proc.returncode == 2
    assert_one_error_line(proc, "PATH", "tiny.toml (2 episodes)", "other.toml (1 episodes)")
    assert snapshot(heuristic_run) == before


def test_resume_with_the_same_plan_goes_on(heuristic_run: Path, work: Path) -> None:
    """The suite by another path and options that do not change episodes are fine."""
    before = snapshot(heuristic_run)
    proc = chaosops(
        "run",
        work / "tiny.toml",
        *TINY[1:],
        "--resume",
        "--concurrency",
        "3",
        "--out",
        heuristic_run,
        cwd=work,
    )
    assert proc.returncode == 0, proc.stderr
    assert "2 of 2 episodes already done" in proc.stderr
    after = snapshot(heuristic_run)
    assert after["results.jsonl"] == before["results.jsonl"]
    assert after["run.json"] == before["run.json"]


def test_a_damaged_run_file_is_one_line(heuristic_run: Path, work: Path) -> None:
    out = work / "resume-damaged"
    shutil.copytree(heuristic_run, out)
    (out / "run.json").write_text("[1, 2")
    before = snapshot(out)
    proc = chaosops("run", *TINY, "--resume", "--out", out, cwd=work)
    assert proc.returncode == 2
    assert_one_error_line(proc, str(out / "run.json"), "JSON object")
    assert snapshot(out) == before


def test_a_run_without_run_file_is_checked_against_its_results(
    heuristic_run: Path,
    work: Path,
) -> None:
    """A folder written before run.json existed: its recorded policy and episodes."""
    out = work / "resume-legacy"
    shutil.copytree(heuristic_run, out)
    (out / "run.json").unlink()
    before = snapshot(out)
    oracle = chaosops("run", *TINY, "--resume", "--policy", "oracle", "--out", out, cwd=work)
    assert oracle.returncode == 2
    assert_one_error_line(oracle, "--policy", "recorded heuristic", "given oracle")
    shifted = chaosops("run", *TINY, "--resume", "--seed-offset", "5", "--out", out, cwd=work)
    assert shifted.returncode == 2
    assert_one_error_line(shifted, "--seed-offset", "heuristic/", "without it")
    assert snapshot(out) == before
    same = chaosops("run", *TINY, "--resume", "--out", out, cwd=work)
    assert same.returncode == 0, same.stderr
    assert "2 of 2 episodes already done" in same.stderr
    assert not (out / "run.json").exists()


# ------------------------------------------------------------------------ eval


def test_eval_does_not_overwrite_an_earlier_evaluation(work: Path) -> None:
    out = work / "eval-twice"
    args = ("eval", *TINY, "--policies", "oracle", "--out", out)
    first = chaosops(*args, cwd=work)
    assert first.returncode == 0, first.stderr
    before = snapshot(out)
    assert "eval.json" in before
    again = chaosops(*args, cwd=work)
    assert again.returncode == 2
    assert_one_error_line(again, f"output folder {out}", "eval.json", "--out", "remove")
    assert "oracle" not in again.stdout  # refused before running anything
    explicit = chaosops(*args, "--json", out / "eval.json", "--no-chart", cwd=work)
    assert explicit.returncode == 2
    assert_one_error_line(explicit, str(out / "eval.json"), "--json")
    assert snapshot(out) == before
    # the policies' run folders are an evaluation too: refused all the same
    to_stdout = chaosops(*args, "--json", "-", "--no-chart", cwd=work)
    assert_one_error_line(to_stdout, f"output folder {out / 'oracle'}", "--resume")
    assert snapshot(out) == before
    resumed = chaosops(*args, "--json", "-", "--no-chart", "--resume", cwd=work)
    assert resumed.returncode == 0, resumed.stderr
    assert orjson.loads(resumed.stdout)["policies"] == ["oracle"]
    assert "2 of 2 episodes already done" in resumed.stderr
    assert snapshot(out) == before  # nothing left to play: the folder as it was


# -------------------------------------------------------------------- mock-llm


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port with a listening socket on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_mock_llm_on_a_taken_port_is_one_line(
    work: Path,
    taken_port: int,
) -> None:
    proc = chaosops("mock-llm", "--port", str(taken_port), cwd=work)
    assert proc.returncode == 2  # as chaosops view
    assert_one_error_line(
        proc, f"port {taken_port} on 127.0.0.1 is already in use", "another --port"
    )


def test_mock_llm_main_on_a_taken_port_is_one_line(
    taken_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert mock_llm.main(["--port", str(taken_port)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"port {taken_port} on 127.0.0.1 is already in use" in err


def test_hf_settings_that_do_not_go_together_are_one_line(work: Path) -> None:
    """The episode conversation is the trainers' chat: a user-turn system prompt
    or a JSON answer would be ignored there, so each is refused before loading,
    by its flag on the command line and by its table in a run file."""
    flags = ("run", "tiny.toml", "--policy", "hf", "--hf-model", "no-such-model",
             "--hf-conversation", "episode", "--out", work / "hf-episode")  # fmt: skip
    for extra, named in ((("--hf-system-prompt", "user"), "--hf-system-prompt='user'"),
                         (("--hf-answer", "json"), "--hf-answer='json'")):  # fmt: skip
        proc = chaosops(*flags, *extra, cwd=work)
        assert proc.returncode == 2
        assert_one_error_line(proc, "--hf-conversation 'episode'", named)
    (work / "hf-episode.toml").write_text(
        '[hf.trained]\nmodel = "no-such-model"\nconversation = "episode"\n'
        'system_prompt = "user"\n[roles]\nsre = "trained"\n'
    )
    proc = chaosops("run", "--config", "hf-episode.toml", "--out", work / "hf-file", cwd=work)
    assert_one_error_line(proc, "hf-episode.toml: [hf.trained]: conversation 'episode'",
                          "system_prompt='user'")  # fmt: skip
    assert not (work / "hf-episode").exists() and not (work / "hf-file").exists()
