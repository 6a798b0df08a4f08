"""Looking at runs without a browser: ``chaosops transcript``, ``chaosops watch``
(its dashboard drawn on rich's recording console), the index that follows a
folder being written, and bad input."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import select
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.console import Console

from chaosops.viewer.dashboard import frame_view, run_view
from chaosops.viewer.frames import frames
from chaosops.viewer.index import RunIndex

from ._cli import (
    TIMEOUT,
    assert_one_error_line,
    chaosops,
    cli_env,
    command,
    interrupt,
    jsonl,
    viewed_page,
    written,
)


@pytest.fixture(scope="module")
def oracle_run(work: Path) -> Path:
    out = work / "oracle"
    proc = chaosops("run", "--policy", "oracle", "--limit", "12", "--no-progress", "--out", out,
                    cwd=work)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out


def drawn(renderable: object, width: int = 120) -> str:
    console = Console(record=True, width=width, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def test_a_run_writes_its_log_into_its_folder(oracle_run: Path) -> None:
    events = {e["event"] for e in jsonl(oracle_run / "log.jsonl")}
    assert {"episode_started", "turn", "episode_finished"} <= events


def test_transcript_prints_each_step_in_order(oracle_run: Path, work: Path) -> None:
    record = jsonl(oracle_run / "results.jsonl")[0]
    proc = chaosops("transcript", oracle_run, "--episode", record["episode_id"], cwd=work)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert text.startswith(f"episode {record['episode_id']}  ({record['run_key']})\n")
    headings = [line for line in text.splitlines() if line.startswith("step ")]
    assert [h.split()[1] for h in headings] == [str(n) for n in range(1, len(record["steps"]) + 1)]
    assert [h.split()[2] for h in headings] == [s["role"] for s in record["steps"]]
    assert record["failure_type"] == "db_deadlock"
    assert "\n  action: restart db\n" in text  # the oracle's fix, as applied
    assert "  saw:\n    ChaosOps incident, step 0." in text  # the view the role was sent
    assert f"resolved in {len(record['steps'])} steps; reward +" in text


def test_watch_on_a_finished_run_shows_its_final_state(oracle_run: Path, work: Path) -> None:
    proc = chaosops("watch", oracle_run, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert "12 of 12 episodes done (100%)" in proc.stdout and "finished" in proc.stdout
    assert "turns by role" in proc.stdout and "by tier, so far" in proc.stdout
    last = jsonl(oracle_run / "results.jsonl")[-1]["episode_id"]
    assert last in proc.stdout  # the latest episodes, whole ids


def test_watch_an_episode_plays_its_frames(oracle_run: Path, work: Path) -> None:
    record = jsonl(oracle_run / "results.jsonl")[0]
    proc = chaosops("watch", oracle_run, "--episode", record["episode_id"], cwd=work)
    assert proc.returncode == 0, proc.stderr
    steps = [
        line for line in proc.stdout.splitlines() if "step " in line and "reward so far" in line
    ]
    assert len(steps) == len(record["steps"]) + 1  # the first state, then each step
    assert "next: sre" in steps[0] and "episode over" in steps[-1]


def test_a_frame_shows_services_alerts_turn_and_reward(oracle_run: Path) -> None:
    index = RunIndex(oracle_run)
    row = index.rows[0]
    shown = list(frames(index.record(row)))
    first, last = drawn(frame_view(shown[0])), drawn(frame_view(shown[-1]))
    assert "db" in first and "critical" in first and "next: sre" in first
    assert "[page]" not in first and "page payments" in first  # the alert
    assert "dev took: restart db (+110.0)" in last  # the oracle's fix, by the dev
    assert f"reward so far {row.reward:+.1f}" in last and "episode over" in last
    assert "critical" not in last  # the fix took: every service healthy again


def test_the_dashboard_counts_a_run_while_it_is_written(oracle_run: Path, tmp_path: Path) -> None:
    live = tmp_path / "live"
    live.mkdir()
    shutil.copy(oracle_run / "run.json", live / "run.json")
    lines = (oracle_run / "results.jsonl").read_bytes().splitlines(keepends=True)
    (live / "results.jsonl").write_bytes(b"".join(lines[:5]) + lines[5][:40])  # a torn line
    started = {"event": "episode_started", "episode_id": "f" * 32, "failure_type": "dns_outage",
               "difficulty": "hard", "seed": 7}  # fmt: skip
    turn = {"event": "turn", "episode_id": "f" * 32, "step": 1, "role": "sre"}
    (live / "log.jsonl").write_bytes(orjson.dumps(started) + b"\n" + orjson.dumps(turn) + b"\n")
    with written(live / "results.jsonl"):  # as the run writing it holds it
        index = RunIndex(live)
        text = drawn(run_view(index))
    assert "5 of 12 episodes done (42%)" in text and "in flight 1" in text
    assert "running" in text and "dns_outage/hard/seed=7" in text
    with (live / "results.jsonl").open("ab") as handle:
        handle.write(lines[5][40:] + b"".join(lines[6:]))
    index.refresh()
    assert "12 of 12 episodes done (100%)" in drawn(run_view(index))
    assert len(index.trajectory(index.rows[0].episode_id)) == 0  # no trajectories copied
    index.close()


def test_trajectory_blocks_are_found_for_every_episode(oracle_run: Path) -> None:
    index = RunIndex(oracle_run)
    lines = jsonl(oracle_run / "trajectories.jsonl")
    for row in index.rows:
        steps = index.trajectory(row.episode_id)
        assert steps == [line for line in lines if line["episode_id"] == row.episode_id]
        assert [s["step"] for s in steps] == list(range(1, row.steps + 1))
    index.close()


def test_bad_input_is_one_line(oracle_run: Path, work: Path, tmp_path: Path) -> None:
    proc = chaosops("watch", tmp_path, cwd=work)
    assert_one_error_line(proc, str(tmp_path), "not a chaosops run folder")
    proc = chaosops("transcript", oracle_run, "--episode", "nope", cwd=work)
    assert_one_error_line(proc, "no finished episode 'nope'", "12 episodes")
    ids = [r["episode_id"] for r in jsonl(oracle_run / "results.jsonl")]
    shared = min({i[0] for i in ids}, key=lambda c: -sum(i.startswith(c) for i in ids))
    assert sum(i.startswith(shared) for i in ids) > 1  # 12 ids, 16 first characters: found
    proc = chaosops("watch", oracle_run, "--episode", shared, cwd=work)
    assert_one_error_line(proc, f"'{shared}' names", "give more of the id")
    proc = chaosops("view", tmp_path / "missing", cwd=work)
    assert_one_error_line(proc, "no such run folder")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = chaosops("view", oracle_run, "--port", str(port), cwd=work)
        assert_one_error_line(proc, f"--port {port}", "give another --port")


def test_ctrl_c_leaves_the_dashboard_of_a_running_run(oracle_run: Path, work: Path) -> None:
    """watch on a terminal (a pseudo-terminal here) draws the dashboard of a run
    that has not ended and follows it; Ctrl-C, once it has drawn, leaves it
    with exit 0."""
    running = work / "running"
    running.mkdir()
    shutil.copy(oracle_run / "run.json", running / "run.json")
    first = (oracle_run / "results.jsonl").read_bytes().splitlines(keepends=True)[0]
    (running / "results.jsonl").write_bytes(first)  # one episode of twelve: still running
    writer = _hold_as_a_run(running)  # the lock a run holds while it writes the folder
    leader, follower = pty.openpty()
    env = {**cli_env(), "TERM": "xterm"}
    proc = subprocess.Popen([command(), "watch", str(running), "--every", "0.1"], cwd=work,
                            env=env, stdin=subprocess.DEVNULL, stdout=follower,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    os.close(follower)
    try:
        drawn = _read_until(leader, b"1 of 12", TIMEOUT)
        assert proc.poll() is None  # following: the run has not ended
        stderr = interrupt(proc)
    finally:
        os.close(leader)
        writer.close()
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr
    assert b"chaosops watch" in drawn and b"in flight" in drawn


def _hold_as_a_run(folder: Path) -> Any:
    """The results file opened and locked as a run writing ``folder`` holds it."""
    handle = open(folder / "results.jsonl", "ab")
    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    return handle


def _copy_started(oracle_run: Path, folder: Path) -> None:
    folder.mkdir()
    shutil.copy(oracle_run / "run.json", folder / "run.json")
    first = (oracle_run / "results.jsonl").read_bytes().splitlines(keepends=True)[0]
    (folder / "results.jsonl").write_bytes(first)  # one episode of twelve


def test_watch_in_a_pipe_prints_plain_lines_and_ends_with_the_run(
    oracle_run: Path, work: Path
) -> None:
    running = work / "piped"
    _copy_started(oracle_run, running)
    writer = _hold_as_a_run(running)
    proc = subprocess.Popen([command(), "watch", str(running), "--every", "0.05"], cwd=work,
                            env=cli_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        line = proc.stdout.readline()
        assert line == "1 of 12 episodes done, 100% resolved so far, 0 in flight\n", line
        assert proc.poll() is None  # following while the run writes
        rest = (oracle_run / "results.jsonl").read_bytes().splitlines(keepends=True)[1:]
        writer.write(b"".join(rest))
        writer.flush()
        shutil.copy(oracle_run / "summary.json", running / "summary.json")
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        writer.close()
        proc.kill()
    assert proc.returncode == 0 and not err, err
    assert "12 of 12 episodes done" in out and "finished" in out


def test_watch_of_a_folder_no_run_writes_prints_its_state_and_exits(
    oracle_run: Path, work: Path
) -> None:
    stopped = work / "interrupted"
    _copy_started(oracle_run, stopped)  # no summary.json, and nobody holds the lock
    proc = chaosops("watch", stopped, "--every", "0.05", cwd=work)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    assert "1 of 12 episodes done" in proc.stdout


def _read_until(fd: int, wanted: bytes, timeout: float) -> bytes:
    """What a terminal shows until ``wanted`` appears (fails after ``timeout``)."""
    seen = b""
    deadline = time.monotonic() + timeout
    while wanted not in seen:
        left = deadline - time.monotonic()
        assert left > 0, seen[-2000:]
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            seen += os.read(fd, 65536)
    return seen


def test_view_of_an_evaluation_folder_serves_each_entry(work: Path) -> None:
    out = work / "evaluated"
    proc = chaosops("eval", "--policies", "heuristic,oracle", "--limit", "4", "--no-progress",
                    "--no-chart", "--out", out, cwd=work)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    line, text = viewed_page(work, out, "/")
    assert "serving 2 run(s)" in line, line
    assert '<a href="/run/0">heuristic</a>' in text and '<a href="/run/1">oracle</a>' in text


def test_a_host_that_is_not_this_machines_is_named_not_the_port(
    oracle_run: Path, work: Path
) -> None:
    # binding an address this machine lacks fails at once, locally: no packet leaves
    done = chaosops("view", oracle_run, "--host", "10.255.255.1", "--port", "0", cwd=work)
    assert_one_error_line(done, "--host 10.255.255.1: not an address of this machine")
    assert "--port" not in done.stderr
