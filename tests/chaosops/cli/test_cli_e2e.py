"""End-to-end tests of the installed ``chaosops`` command, run in subprocesses."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from ._cli import (
    TIMEOUT,
    assert_one_error_line,
    chaosops,
    free_port,
    interrupt,
    jsonl,
    killed_run,
    llm_run,
    mock_process,
    spawn,
    wait_for_results,
)

# ------------------------------------------------------------------ default run


@pytest.fixture(scope="module")
def default_run(work: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = work / "default"
    return chaosops("run", "--out", out, cwd=work), out


def test_default_run_prints_the_table_and_writes_outputs(
    default_run: tuple[subprocess.CompletedProcess[str], Path],
    canonical_size: int,
) -> None:
    proc, out = default_run
    assert proc.returncode == 0, proc.stderr
    for word in ("policy", "tier", "success", "MTTR", "heuristic", "easy", "medium", "hard"):
        assert word in proc.stdout
    results = jsonl(out / "results.jsonl")
    assert len(results) == canonical_size
    assert len({r["run_key"] for r in results}) == canonical_size
    assert {r["policy"] for r in results} == {"heuristic"}
    trajectories = jsonl(out / "trajectories.jsonl")
    assert len(trajectories) == sum(len(r["steps"]) for r in results)
    assert {t["episode_id"] for t in trajectories} == {r["episode_id"] for r in results}
    first = trajectories[0]
    assert first["prompt"][0]["role"] == "system"
    answer = {k: first["action"][k] for k in ("action_type", "target", "args")}
    assert orjson.loads(first["completion"]) == answer
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["episodes"] == canonical_size and summary["complete"]
    assert [(r["policy"], r["tier"]) for r in summary["rows"]] == [
        ("heuristic", "easy"),
        ("heuristic", "medium"),
        ("heuristic", "hard"),
    ]


def test_replay_passes_then_fails_on_a_tampered_file(
    default_run: tuple[subprocess.CompletedProcess[str], Path],
    work: Path,
    canonical_size: int,
) -> None:
    _, out = default_run
    ok = chaosops("replay", out, cwd=work)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "every reward matches" in ok.stdout
    records = jsonl(out / "results.jsonl")
    victim = next(r for r in records if len(r["steps"]) >= 2)
    victim["steps"][1]["reward"] += 5.0
    tampered = work / "tampered.jsonl"
    tampered.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    bad = chaosops("replay", tampered, cwd=work)
    assert bad.returncode == 1
    assert f"episode {victim['episode_id']}" in bad.stdout
    assert "step 2" in bad.stdout
    assert (
        bad.stdout.strip()
        .splitlines()[-1]
        .startswith(f"replay: 1 of {canonical_size} episodes differ")
    )


def test_existing_run_is_not_clobbered(
    default_run: tuple[subprocess.CompletedProcess[str], Path], work: Path
) -> None:
    _, out = default_run
    before = (out / "results.jsonl").read_bytes()
    proc = chaosops("run", "--out", out, cwd=work)
    assert proc.returncode == 2
    assert_one_error_line(proc, str(out), "--resume")
    assert (out / "results.jsonl").read_bytes() == before


# ------------------------------------------------------------------- bad input


BAD_TOML = 'name = "broken"\n[[scenarios]\nfailure_type = "db_deadlock"\n'
BAD_FAILURE = (
    'name = "typo"\ndifficulty = "easy"\n[[scenarios]]\nfailure_type = "db_dedlock"\nseeds = [1]\n'
)


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("run", "--policy", "nope"), ("'nope'", "heuristic")),
        (("run", "missing.toml"), ("missing.toml",)),
        (("run", "broken.toml"), ("broken.toml", "line")),
        (("run", "typo.toml"), ("typo.toml", "db_dedlock", "db_deadlock")),
        (("run", "--concurrency", "0"), ("--concurrency", "'0'", ">= 1")),
        (("run", "--concurrency", "-3"), ("--concurrency", "'-3'")),
        (("run", "--turn-timeout", "-1"), ("--turn-timeout", "'-1'", "positive")),
        (("run", "--role-timeout", "boss=1"), ("boss=1", "sre")),
        (("run", "--role-timeout", "dev=soon"), ("dev=soon",)),
        (("eval", "--policies", "random,smart"), ("'smart'", "oracle")),
        (("replay", "nothing-here.jsonl"), ("nothing-here.jsonl",)),
        (("run", "--out", "blocker/out"), ("blocker",)),
    ],
    ids=lambda v: (
        "-".join(v) if isinstance(v, tuple) and v and v[0] in {"run", "eval", "replay"} else None
    ),
)
def test_bad_input_gets_one_line(
    args: tuple[str, ...], needles: tuple[str, ...], work: Path
) -> None:
    (work / "broken.toml").write_text(BAD_TOML)
    (work / "typo.toml").write_text(BAD_FAILURE)
    (work / "blocker").write_text("a file, not a folder")
    proc = chaosops(*args, cwd=work)
    assert_one_error_line(proc, *needles)


def test_bad_event_loop_setting_gets_one_line(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTORS_LOOP", "trio")
    proc = chaosops("run", "--out", "out", cwd=work)
    assert_one_error_line(proc, "ACTORS_LOOP", "'trio'", "uvloop")
    assert not (work / "out").exists()


def test_scenarios_lists_the_canonical_suites_and_rejects_a_broken_file(
    work: Path, canonical_size: int
) -> None:
    ok = chaosops("scenarios", cwd=work)
    assert ok.returncode == 0, ok.stderr
    for name in ("easy", "medium", "hard", "rogue_deploy_bot", f"{canonical_size} scenarios"):
        assert name in ok.stdout
    (work / "typo.toml").write_text(BAD_FAILURE)
    bad = chaosops("scenarios", work / "typo.toml", cwd=work)
    assert bad.returncode == 2
    assert_one_error_line(bad, "typo.toml", "scenarios[0].failure_type", "db_dedlock")


def test_log_json_to_stdout(work: Path) -> None:
    proc = chaosops(
        "run",
        "tiny.toml",
        "--policy",
        "oracle",
        "--log-json",
        "-",
        "--out",
        work / "logs",
        cwd=work,
    )
    assert proc.returncode == 0, proc.stderr
    events = [orjson.loads(line) for line in proc.stdout.splitlines()]
    assert events, "no log lines on stdout"
    names = {e["event"] for e in events}
    assert {"run_started", "episode_finished", "turn"} <= names
    assert all({"timestamp", "level", "event"} <= e.keys() for e in events)
    # the progress bar and the table went to stderr; the bar's last line is the
    # finished run: every episode done, none in flight
    assert "ep/s" in proc.stderr and "success" in proc.stderr
    last_bar = [line for line in proc.stderr.splitlines() if "ep/s" in line][-1]
    assert "in flight 0 · timeouts 0 · errors 0" in last_bar
    total = len(jsonl(work / "logs" / "results.jsonl"))
    assert f"{total}/{total}" in last_bar


def test_eval_writes_json_and_chart(work: Path) -> None:
    out = work / "eval"
    proc = chaosops("eval", "--episodes-per-type", "1", "--no-progress", "--out", out, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert "ep/s" not in proc.stderr and "in flight" not in proc.stderr  # no progress bar
    data = orjson.loads((out / "eval.json").read_bytes())
    rows = {(r["policy"], r["tier"]): r for r in data["rows"]}
    assert len(rows) == 9
    assert all(rows[("oracle", t)]["success_rate"] == 1.0 for t in ("easy", "medium", "hard"))
    assert rows[("oracle", "hard")]["rogue_detection_rate"] == 1.0
    assert "oracle" in proc.stdout and "random" in proc.stdout
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "matplotlib" in proc.stderr
    else:
        assert (out / "eval_reward_by_tier.png").read_bytes()[:4] == b"\x89PNG"


# -------------------------------------------------------------- LLM, kills


def test_unreachable_llm_endpoint(work: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    proc = chaosops(
        "run",
        "tiny.toml",
        "--policy",
        "llm",
        "--llm-base-url",
        url,
        "--out",
        work / "unreachable",
        cwd=work,
    )
    assert proc.returncode == 1
    assert_one_error_line(proc, "127.0.0.1")
    assert not (work / "unreachable" / "results.jsonl").exists()


def test_unknown_llm_model(work: Path, mock_llm: str) -> None:
    proc = chaosops(
        "run",
        "tiny.toml",
        "--policy",
        "llm",
        "--llm-base-url",
        mock_llm,
        "--llm-model",
        "gpt-nope",
        "--llm-api-key",
        "sk-secret-123",
        "--out",
        work / "nomodel",
        cwd=work,
    )
    line = assert_one_error_line(proc, "gpt-nope", "chaosops-mock")
    assert "sk-secret-123" not in line


def _check_folder(out: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    results = jsonl(out / "results.jsonl")
    keys = [r["run_key"] for r in results]
    assert len(keys) == len(set(keys)), "duplicate results lines"
    trajectories = jsonl(out / "trajectories.jsonl")
    ids = [r["episode_id"] for r in results]
    assert len(trajectories) == sum(len(r["steps"]) for r in results)
    assert sorted({t["episode_id"] for t in trajectories}) == sorted(ids)
    summary = orjson.loads((out / "summary.json").read_bytes())
    return results, summary


def _untimed(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary without its turn latencies: the same records are played in
    another time by a resumed run."""
    for figures in summary["roles"]:
        assert figures["latency_p50_ms"] <= figures["latency_p99_ms"]
        figures["latency_p50_ms"] = figures["latency_p99_ms"] = None
    return summary


@pytest.fixture(scope="module")
def clean_llm_run(work: Path, mock_llm: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    out = work / "llm-clean"
    secret = "sk-test-secret-4242"
    proc = chaosops(*llm_run(work, mock_llm, out, "--llm-api-key", secret), cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert secret not in proc.stdout + proc.stderr
    for path in out.iterdir():
        assert secret.encode() not in path.read_bytes(), path.name
    return _check_folder(out)


def test_sigkill_then_resume_gives_the_clean_summary(
    work: Path, mock_llm: str, clean_llm_run: tuple[list[dict[str, Any]], dict[str, Any]]
) -> None:
    out = work / "llm-killed"
    killed_run(*llm_run(work, mock_llm, out), cwd=work, out=out, after=2)
    partial = jsonl(out / "results.jsonl")  # whole lines only
    jsonl(out / "trajectories.jsonl")
    assert 2 <= len(partial) < 12
    resumed = chaosops(*llm_run(work, mock_llm, out, "--resume"), cwd=work)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming" in resumed.stderr
    results, summary = _check_folder(out)
    clean_results, clean_summary = clean_llm_run
    assert _untimed(summary) == _untimed(clean_summary)
    assert sorted(r["run_key"] for r in results) == sorted(r["run_key"] for r in clean_results)


def test_sigint_exits_130_and_keeps_finished_episodes(work: Path, mock_llm: str) -> None:
    out = work / "llm-interrupted"
    proc = spawn(*llm_run(work, mock_llm, out), cwd=work)
    try:
        wait_for_results(proc, out / "results.jsonl", 1)
    finally:
        stderr = interrupt(proc)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    # the hint is the exact command that finishes this run, and it does
    [hint] = [line for line in stderr.splitlines() if "interrupted" in line]
    assert hint.endswith(f"finish it with chaosops run --resume --out {out}"), hint
    results, summary = _check_folder(out)
    assert 1 <= len(results) < 12
    assert summary["complete"] is False and summary["episodes"] == len(results)
    resumed = chaosops("run", "--resume", "--out", out, "--no-progress", cwd=work)
    assert resumed.returncode == 0, resumed.stderr
    assert len(jsonl(out / "results.jsonl")) == 12


@pytest.mark.parametrize("presses", [2, 3])
def test_more_ctrl_c_while_stopping_still_ends_in_one_clean_stop(
    work: Path, mock_llm: str, presses: int
) -> None:
    """Ctrl-C pressed again while the run stops (two or three signals a few
    milliseconds apart): the stop still writes summary.json and the exact
    resume command, exit 130, no traceback."""
    out = work / f"llm-pressed-{presses}"
    proc = spawn(*llm_run(work, mock_llm, out), cwd=work)
    try:
        wait_for_results(proc, out / "results.jsonl", 1)
        for _ in range(presses - 1):
            proc.send_signal(signal.SIGINT)
            time.sleep(0.005)
    finally:
        stderr = interrupt(proc)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert f"finish it with chaosops run --resume --out {out}" in stderr, stderr
    results, summary = _check_folder(out)
    assert summary["complete"] is False and summary["episodes"] == len(results)


def _loading(proc: subprocess.Popen[str]) -> None:
    """Wait until the command is importing its libraries (pydantic's native core
    is mapped): from then on a Ctrl-C is the command's, not the interpreter's
    start-up, which no Python program can take over."""
    maps = Path(f"/proc/{proc.pid}/maps")
    deadline = time.monotonic() + TIMEOUT
    while "_pydantic_core" not in maps.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, "the command never loaded"
        time.sleep(0.002)


def test_ctrl_c_at_any_moment_of_a_run_is_one_line_and_exit_130(work: Path) -> None:
    """Signals sent while the command loads, plans and plays: never a traceback."""
    for delay in (0.0, 0.15, 0.3, 0.6):
        out = work / f"early-{delay}"
        proc = spawn("run", "--tier", "easy", "--episodes-per-type", "200", "--no-progress",
                     "--out", out, cwd=work)  # fmt: skip
        _loading(proc)
        time.sleep(delay)  # after loading began, the property holds whenever it lands
        stderr = interrupt(proc)
        assert proc.returncode in (0, 130), (delay, stderr)
        assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, (delay, stderr)
        if proc.returncode == 130:
            assert any("interrupted" in line for line in stderr.splitlines()), stderr


def test_an_endpoint_that_keeps_failing_stops_the_run(work: Path) -> None:
    """Every completion an HTTP 500 (models still listed): the run stops once
    --model-max-failures calls in a row failed for good (given by its old name,
    --llm-max-failures), one line, exit 1, and the folder stays resumable
    (summary complete: false). Text answers, which need no probe at the start
    (the probe's own failure is tested apart); no retries, and a deadline far
    beyond a 500's answer, so that a loaded machine still fails on the 500s."""
    with mock_process(work, "--rate-500", "1") as url:
        out = work / "llm-failing"
        proc = chaosops(
            *llm_run(work, url, out, "--llm-max-failures", "3", "--llm-retries", "0",
                     "--turn-timeout", "30", "--log-json", work / "llm-failing.jsonl",
                     "--llm-answer", "text"),
            cwd=work,
        )  # fmt: skip
        table = work / "llm-failing-eval.json"
        evaluated = chaosops(
            "eval", "tiny.toml", "--policies", "llm", "--llm-base-url", url, "--no-progress",
            "--no-chart", "--json", table, "--llm-max-failures", "3", "--llm-retries", "0",
            "--turn-timeout", "30",
            "--log-json", work / "llm-failing-eval.jsonl", "--llm-answer", "text", cwd=work,
        )  # fmt: skip
    assert_one_error_line(proc, "LLM calls in a row failed", "HTTP 500", "--model-max-failures 3",
                          "--resume")  # fmt: skip
    assert proc.returncode == 1
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["complete"] is False and summary["episodes"] < summary["planned"]
    # an episode that finished while every call failed is not kept: --resume plays it again
    assert not [r for r in jsonl(out / "results.jsonl") if r["errors"]]
    # eval stops the same way; what finished, if anything, is evaluated as on Ctrl-C
    line = assert_one_error_line(evaluated, "LLM calls in a row failed", "--model-max-failures 3")
    assert evaluated.returncode == 1
    if "no evaluation written" not in line:
        assert orjson.loads(table.read_bytes())["complete"] is False


def test_unreadable_answers_are_summed_up_not_printed_per_turn(work: Path) -> None:
    """Without --log-json, a model that never answers with an action does not
    flood the terminal with a warning per turn: one note sums them up, and one
    per role says it never played a move of its own (exit 1)."""
    with mock_process(work, "--rate-garbage", "1") as url:
        out = work / "llm-garbage"
        proc = chaosops(*llm_run(work, url, out, "--episodes-per-type", "1"), cwd=work)
    assert proc.returncode == 1, proc.stderr
    steps = jsonl(out / "trajectories.jsonl")
    assert steps and all(s["parse_error"] for s in steps)
    lines = proc.stderr.strip().splitlines()
    assert not any("parse_error" in line and "trajectories" not in line for line in lines)
    [summed] = [line for line in lines if "could not be read as a legal move" in line]
    assert summed.startswith(f"chaosops: {len(steps)} answer(s)")
    roles = [line for line in lines if "never played a move of its own" in line]
    assert len(roles) == 4
    # the answer format, that note, "wrote ...", a line per role, nothing per turn
    assert len(lines) <= 3 + len(roles), proc.stderr
