"""examples/train_grpo.py runs where TRL is installed: SFT from an oracle run,
a held-out evaluation, GRPO steps through ChaosOpsToolEnv with the credit
reward, the evaluation again, and the curve's data.

The test extra installs TRL and torch (CI machines keep torch's CPU build on
disk); elsewhere the test is skipped without TRL. docs/training.md shows a
full run of the example."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="the train extra (TRL, torch) is not installed")

EXAMPLE = Path(__file__).parents[3] / "examples" / "train_grpo.py"


@pytest.mark.timeout(900)  # the bound of its subprocess (600 s), not pytest's default
def test_the_example_trains_a_few_steps(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", "2", "--sft-steps", "50", "--eval-rows", "3",
         "--runtime-scenarios", "2",
         "--out", str(tmp_path), "--plot", str(tmp_path / "curve.png")],
        capture_output=True, text=True, timeout=600, check=False,
        env={"TRL_EXPERIMENTAL_SILENCE": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    steps = re.findall(r"^grpo step (\d+): credit ([-+\d.]+), .* loss ([-\d.]+)", done.stdout,
                       re.M)  # fmt: skip
    assert [int(s[0]) for s in steps] == [1, 2], done.stdout
    evals = re.findall(r"^eval after (SFT|GRPO): credit ([-+\d.]+) .* on 3 held-out rows$",
                       done.stdout, re.M)  # fmt: skip
    assert [e[0] for e in evals] == ["SFT", "GRPO"], done.stdout
    curve = json.loads((tmp_path / "curve.json").read_text())
    assert [p["step"] for p in curve["log"] if p["phase"] == "grpo"] == [1, 2]
    assert (tmp_path / "curve.png").read_bytes()[:4] == b"\x89PNG"
    assert "held-out credit" in done.stdout
    # the runtime's evaluations: after SFT, then the callback's at the last step
    assert re.search(r"^runtime eval after SFT: success [\d.]+, pass@1 [\d.]+, mean_return",
                     done.stdout, re.M), done.stdout  # fmt: skip
    assert [r["step"] for r in curve["runtime"]] == [2]
    assert 0.0 <= curve["runtime"][0]["eval/legal_share"] <= 1.0
    for step in (0, 2):
        assert (tmp_path / "runtime" / f"step-{step}" / "summary.json").exists()
    assert (tmp_path / "final" / "model.safetensors").exists()
