"""The code passes ruff's checks and its formatter, and mypy's type check of
actors and chaosops, as configured in pyproject.toml, so that the README's
test command (which CI runs) checks it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._needs import needs

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ["actors", "chaosops", "tests", "examples", "benchmarks", "environments"]


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    needs(ruff, "ruff", "pip install -e '.[test]'")
    return subprocess.run([ruff, *args, *CHECKED], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip


@pytest.mark.parametrize("args", [("check", "--no-cache"), ("format", "--check", "--no-cache")])
def test_ruff_finds_nothing(args: tuple[str, ...]) -> None:
    done = _ruff(*args)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]


@pytest.mark.timeout(900)  # a fresh cache: 40 s on 2 idle cores, over 120 s at a load of 9
def test_mypy_finds_nothing(tmp_path: Path) -> None:
    mypy = shutil.which("mypy", path=str(Path(sys.executable).parent)) or shutil.which("mypy")
    needs(mypy, "mypy", "pip install -e '.[test]'")
    done = subprocess.run([str(mypy), "--cache-dir", str(tmp_path / "cache")], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
