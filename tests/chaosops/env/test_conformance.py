"""The shared conformance checker replays recorded trajectories against this world."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]  # the repository
CONFORMANCE = ROOT.parent / "shared" / "conformance"


def test_world_conformance() -> None:
    checker = CONFORMANCE / "check_world.py"
    cases = CONFORMANCE / "world_cases.json"
    if not (checker.is_file() and cases.is_file()):
        pytest.skip(f"conformance checker not found beside the repository ({CONFORMANCE})")
    result = subprocess.run(
        [sys.executable, str(checker), str(cases)],
        capture_output=True,
        text=True,
        timeout=100,
        cwd=ROOT,
    )
    last = result.stdout.strip().splitlines()[-1]
    match = re.match(r"fidelity: (\d+)/(\d+)", last)
    assert match, result.stdout + result.stderr
    assert match.group(1) == match.group(2), result.stdout
    assert result.returncode == 0
