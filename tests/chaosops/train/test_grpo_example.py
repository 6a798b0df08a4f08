"""examples/train_grpo.py runs where TRL is installed: rollouts through
ChaosOpsToolEnv, a reward and a loss per optimizer step.

.ci/run does not install the train extra: TRL brings torch, whose wheel and
libraries add gigabytes to the test environment for this one test. The test
is skipped without TRL; docs/training.md shows a run of the example."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="the train extra (TRL, torch) is not installed")

EXAMPLE = Path(__file__).parents[3] / "examples" / "train_grpo.py"


def test_the_example_trains_a_few_steps(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", "2", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600, check=False,
        env={"TRL_EXPERIMENTAL_SILENCE": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    steps = re.findall(r"^step (\d+): reward ([-+\d.]+) .* loss ([-\d.]+)", done.stdout, re.M)
    assert [int(s[0]) for s in steps] == [1, 2], done.stdout
    assert "trained 2 steps" in done.stdout
