"""A run from Python written to a run folder: what chaosops run writes, read by
view, watch, transcript and replay, and resumed from Python or by the command."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ._cli import chaosops, jsonl

SCRIPT = """
import sys
from chaosops.runs import run_to_folder
from chaosops.agents.policies import heuristic_policy
from chaosops.curriculum.generator import scenarios_for_tier
from chaosops.env.environment import DEFAULT_TURN_ORDER

summary = run_to_folder(
    sys.argv[1],
    scenarios_for_tier("medium", episodes_per_type=2),
    lambda sc: dict.fromkeys(DEFAULT_TURN_ORDER, heuristic_policy(sc.seed)),
    name="heuristic",
    turn_timeout=5.0,
    resume=len(sys.argv) > 2,
)
print(summary.data["episodes"], summary.data["complete"])
"""


def _python(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT, *map(str, args)], capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip


def _drop_last(folder: Path, count: int) -> None:
    """Cut the last ``count`` episodes from the results, as an interrupted run leaves it."""
    path = folder / "results.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-count]))


def test_a_python_run_writes_a_run_folder_the_commands_read(tmp_path: Path) -> None:
    out = tmp_path / "from-python"
    done = _python(out)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["6", "True"]
    for name in ("results.jsonl", "trajectories.jsonl", "summary.json", "run.json", "log.jsonl"):
        assert (out / name).stat().st_size > 0, name
    records = jsonl(out / "results.jsonl")
    full = sorted((r["run_key"], r["cumulative_reward"]) for r in records)
    assert records[0]["roles"]["dev"]["policy"] == records[0]["policy"]  # not null: "played by"
    assert chaosops("replay", out / "results.jsonl", cwd=tmp_path).returncode == 0
    assert chaosops("watch", out, cwd=tmp_path).returncode == 0
    scenario = f"{records[0]['failure_type']}/medium/seed={records[0]['seed']}"
    shown = chaosops("transcript", out, "--episode", scenario, cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout.startswith("episode ")
    # interrupted: resumed from Python, then by the command, to the same results
    _drop_last(out, 2)
    again = _python(out, "--resume")
    assert again.returncode == 0 and again.stdout.split() == ["6", "True"], again.stderr
    _drop_last(out, 3)
    resumed = chaosops("run", "--resume", "--out", out, "--no-progress", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming" in resumed.stderr and "3 of 6 episodes already done" in resumed.stderr
    after = sorted((r["run_key"], r["cumulative_reward"]) for r in jsonl(out / "results.jsonl"))
    assert after == full
    assert orjson.loads((out / "summary.json").read_bytes())["complete"] is True


@pytest.mark.parametrize(
    ("keywords", "said"),
    [
        ({"turn_timeout": 0}, "turn_timeout=0: seconds above 0"),
        ({"turn_timeout": {"sre": -1.0}}, "turn_timeout={'sre': -1.0}"),
        ({"concurrency": 0}, "concurrency=0: a whole number from 1"),
        ({"samples": 0}, "samples=0: a whole number from 1"),
    ],
)
def test_run_to_folder_refuses_a_keyword_out_of_bounds_before_writing(
    tmp_path: Path, keywords: dict, said: str
) -> None:
    from chaosops.curriculum.generator import scenarios_for_tier
    from chaosops.runs import run_to_folder

    with pytest.raises(ValueError, match=re.escape(said)):
        run_to_folder(tmp_path / "out", scenarios_for_tier("easy")[:1], {}, **keywords)
    assert not (tmp_path / "out").exists()
