"""What a newcomer met, third round, through the installed command: repeats
refused, values named as the user wrote them, a closed stdout after a whole
run, the notes that name what was written, and serve's own help."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ._cli import assert_one_error_line, chaosops, cli_env, command


def test_a_role_or_a_policy_given_twice_is_refused(tmp_path: Path) -> None:
    proc = chaosops("run", "--role-policy", "dev=random", "--role-policy=dev=oracle", cwd=tmp_path)
    assert_one_error_line(proc, "--role-policy gives dev 2 times", "each role once")
    proc = chaosops("eval", "--policies", "random,random", "--limit", "1", cwd=tmp_path)
    assert_one_error_line(proc, "'random' listed twice", "each policy once")
    assert not (tmp_path / "runs").exists()


def test_values_are_named_as_given(tmp_path: Path) -> None:
    proc = chaosops("run", "--name", "ünï", "--limit", "1", cwd=tmp_path)
    assert_one_error_line(proc, "ASCII letters, digits")
    proc = chaosops("mock-llm", "--latency", "fast", cwd=tmp_path)
    line = assert_one_error_line(proc, "mock-llm --latency: latency 'fast' not understood")
    assert "Value error" not in line
    env = {**cli_env(), "OPENAI_BASE_URL": "garbage"}
    proc = subprocess.run([command(), "run", "--policy", "llm", "--limit", "1"], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert_one_error_line(proc, "$OPENAI_BASE_URL (the default of --llm-base-url) 'garbage'")
    done = chaosops("run", "--tier", "easy", "--limit", "1", "--no-progress", "--out", "r",
                    cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"{Path('r') / 'log.jsonl'}" in done.stderr.splitlines()[-1]  # the 'wrote' line
    proc = chaosops("run", "--resume", "--out", "r", "--tier", "hard", cwd=tmp_path)
    assert_one_error_line(proc, "--tier differs", "recorded easy, given hard")


def test_a_stdout_closed_after_a_whole_run_keeps_the_outputs(tmp_path: Path) -> None:
    """`chaosops run | head -1`, the reader gone before the table is written:
    exit 0 or 141 (as a shell's closed pipe), never 1, outputs whole."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone from the start: the table cannot be written
    proc = subprocess.run([command(), "run", "--tier", "easy", "--no-progress", "--out", "p"],
                          cwd=tmp_path, env=cli_env(), stdout=write, stderr=subprocess.PIPE,
                          text=True, timeout=120, check=False)  # fmt: skip
    os.close(write)
    assert proc.returncode in (0, 141), proc.stderr
    assert "Traceback" not in proc.stderr
    summary = (tmp_path / "p" / "summary.json").read_text()
    assert '"complete": true' in summary


def test_serve_s_help_has_its_own_words(tmp_path: Path) -> None:
    proc = chaosops("serve", "--help", cwd=tmp_path)
    assert proc.returncode == 0
    assert "--resume" not in proc.stdout and "the table" not in proc.stdout
