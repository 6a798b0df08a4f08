"""examples/pettingzoo_pg.py runs: the masked policy-gradient baseline trains
a few episodes on every tier and reports each tier and failure type, beside
random moves over the same masks. docs/training.md shows full runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chaosops.env.models import FailureType

pytest.importorskip("torch", reason="the example needs torch (the test extra installs it)")
pytest.importorskip("pettingzoo", reason="the pettingzoo extra is not installed")

EXAMPLE = Path(__file__).parents[3] / "examples" / "pettingzoo_pg.py"
FAILURES = tuple(failure.value for failure in FailureType)


@pytest.mark.timeout(900)  # the bound of its subprocess, not pytest's default
def test_the_baseline_trains_and_reports_every_tier_and_failure(tmp_path: Path) -> None:
    out = tmp_path / "pg.json"
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--episodes", "20", "--eval-every", "10",
         "--eval-seeds", "1", "--json", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    curve = json.loads(out.read_text())
    assert [p["episode"] for p in curve["points"]] == [0, 10, 20]
    for figures in (curve["random"], *curve["points"]):
        assert set(figures["by_tier"]) == {"easy", "medium", "hard"}
        assert tuple(figures["by_failure"]) == FAILURES
        shares = [f["success"] for f in figures["by_failure"].values()]
        assert all(0.0 <= share <= 1.0 for share in shares)
        assert figures["all"]["success"] == pytest.approx(sum(shares) / len(shares))
    assert done.stdout.splitlines()[-1].startswith("episode 20 (")
