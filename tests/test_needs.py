"""A missing component skips a test on a developer's machine and fails it in
CI, saying what to install; the run lists every skip at its end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
from tests._needs import needs

def test_needs_a_tool():
    needs(False, "the frobnicator", "apt-get install frobnicator")
"""


def _run(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         str(tmp_path / "test_probe.py")],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120, check=False,
    )  # fmt: skip


def test_missing_skips_with_the_reason_and_fails_in_ci(tmp_path: Path) -> None:
    here = _run(tmp_path, None)
    assert here.returncode == 0 and "1 skipped" in here.stdout, here.stdout
    assert "SKIPPED" in here.stdout and "the frobnicator is missing; apt-get install" in here.stdout
    ci = _run(tmp_path, "true")
    assert ci.returncode == 1 and "1 failed" in ci.stdout, ci.stdout
    assert "in CI every component of the suite must be there" in ci.stdout
