"""Helpers shared by the CLI tests: the installed command run in subprocesses,
JSONL files read strictly, the one-line error check, the tiny suite."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ..._needs import missing


@functools.cache
def command() -> str:
    """The installed ``chaosops`` command (the one beside this interpreter
    first); without one, the calling test fails in CI and skips elsewhere."""
    local = Path(sys.executable).parent / "chaosops"
    if local.exists():
        return str(local)
    found = shutil.which("chaosops")
    if found is None:
        missing("the chaosops command", "pip install -e . (its [project.scripts] entry)")
    return found


TIMEOUT = 60


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["COLUMNS"] = "200"
    env["PYTHONUNBUFFERED"] = "1"
    return env


TORCH_TIMEOUT = 300
"""A command that loads torch and a checkpoint (``--policy hf``): 10 to 40 s on
2 idle cores, several times that on a loaded machine."""


def chaosops(
    *args: str | Path, cwd: Path, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [command(), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=cli_env(),
        timeout=timeout,
        check=False,
    )


def spawn(*args: str | Path, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [command(), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=cli_env(),
    )


def jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSONL file; fails on a torn or unparseable line."""
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), f"{path.name} ends with a torn line"
    return [orjson.loads(line) for line in data.splitlines()]


ANSWER_FORMAT_NOTE = "chaosops: answer format: "
"""The line an LLM run starts with, saying the answer format settled with the
server: said before anything can go wrong, so not the error line."""


def assert_one_error_line(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert proc.returncode != 0, proc
    lines = [
        line for line in proc.stderr.strip().splitlines()
        if not line.startswith(ANSWER_FORMAT_NOTE)
    ]  # fmt: skip
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("chaosops: error: "), lines[0]
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


TINY_SUITE = """\
name = "tiny"
difficulty = "easy"

[[scenarios]]
failure_type = "db_deadlock"
seeds = [0, 1, 2, 3, 4, 5]

[[scenarios]]
failure_type = "memory_leak"
seeds = [0, 1, 2, 3, 4, 5]
"""

TINY = ("tiny.toml", "--episodes-per-type", "1", "--no-progress")
"""A run of the tiny suite (written by the ``work`` fixture): 2 episodes."""


def finished_run(work: Path, name: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``work / name`` holding a finished run of :data:`TINY` (its 2 episodes
    written), and the command that made it."""
    out = work / name
    proc = chaosops("run", *TINY, "--out", out, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert len(jsonl(out / "results.jsonl")) == 2
    return out, proc


@contextlib.contextmanager
def written(results: Path) -> Iterator[None]:
    """``results`` (a results.jsonl) held locked as a run writing its folder holds it."""
    import fcntl

    with open(results, "ab") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path, with its bytes: what a refusal must keep."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def llm_run(work: Path, url: str, out: Path, *extra: str, policy: str = "llm") -> list[str]:
    return [
        "run",
        "tiny.toml",
        "--policy",
        policy,
        "--llm-base-url",
        url,
        "--concurrency",
        "2",
        "--no-progress",
        "--out",
        str(out),
        *extra,
    ]


def wait_for_results(proc: subprocess.Popen[str], path: Path, count: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        assert proc.poll() is None, "the run ended before it could be interrupted"
        time.sleep(0.02)
    raise AssertionError(f"no {count} results in {path} within {TIMEOUT}s")


def killed_run(*args: str | Path, cwd: Path, out: Path, after: int) -> None:
    """``chaosops ARGS`` SIGKILLed once ``out`` holds ``after`` finished episodes."""
    proc = spawn(*args, cwd=cwd)
    try:
        wait_for_results(proc, out / "results.jsonl", after)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=TIMEOUT)
    finally:
        proc.communicate()


@contextlib.contextmanager
def mock_process(cwd: Path, *options: str) -> Iterator[str]:
    """``chaosops mock-llm OPTIONS`` on a free loopback port, in its own
    process; yields its base URL and stops it after."""
    proc = spawn("mock-llm", "--port", "0", *options, cwd=cwd)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "http://" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
        yield line.split(" at ", 1)[1].split()[0]
    finally:
        stop(proc)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def viewed_page(cwd: Path, folder: Path, page: str = "/run/0") -> tuple[str, str]:
    """``chaosops view FOLDER`` on a free port: its first line, and the text of ``page``."""
    server = spawn("view", folder, "--port", "0", cwd=cwd)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        url = line.split(" at ", 1)[1].split()[0].rstrip("/")
        with urllib.request.urlopen(f"{url}{page}", timeout=10) as answer:
            return line, answer.read().decode()
    finally:
        stop(server)
        for stream in (server.stdout, server.stderr):
            if stream is not None:
                stream.close()


def stop(proc: subprocess.Popen[Any]) -> None:
    """Terminate a server started by a test; killed if it lingers."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def interrupt(proc: subprocess.Popen[str], timeout: float = TIMEOUT) -> str:
    """Ctrl-C a spawned command and wait for it; returns its stderr (killed if it hangs)."""
    try:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return stderr
