"""``chaosops replay`` on records with bad field types and on failed episodes."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from chaosops.agents.policies import random_policy
from chaosops.agents.runner import run_batch
from chaosops.curriculum.generator import scenarios_for_tier
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import AgentRole
from chaosops.outputs import result_record
from chaosops.runs import replay_records

from ._cli import TINY_SUITE, assert_one_error_line, chaosops, jsonl


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """A run of one episode per failure type of the tiny suite (two records)."""
    work = tmp_path_factory.mktemp("replay")
    (work / "tiny.toml").write_text(TINY_SUITE)
    out = work / "run"
    proc = chaosops(
        "run", "tiny.toml", "--episodes-per-type", "1", "--out", out, "--no-progress", cwd=work
    )
    assert proc.returncode == 0, proc.stderr
    return work, jsonl(out / "results.jsonl")


def replay_tampered(
    tiny_run: tuple[Path, list[dict[str, Any]]], name: str, **changes: Any
) -> subprocess.CompletedProcess[str]:
    """Replay a copy of the run whose second record (line 2) has ``changes``."""
    work, records = tiny_run
    copy = [dict(r) for r in records]
    copy[1].update(changes)
    path = work / f"{name}.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in copy))
    return chaosops("replay", path, cwd=work)


def _steps(record: dict[str, Any], index: int, *drop: str, **changes: Any) -> list[Any]:
    steps = [dict(s) for s in record["steps"]]
    steps[index].update(changes)
    for name in drop:
        del steps[index][name]
    return steps


@pytest.mark.parametrize(
    ("case", "needles"),
    [
        ("reward-null", ("steps[0].reward: expected a number, got null",)),
        ("reward-string", ("steps[0].reward: expected a number, got 'x'",)),
        ("reward-missing", ("steps[0].reward: missing; expected a number",)),
        ("done-string", ("steps[0].done: expected true or false, got 'yes'",)),
        ("cumulative-null", ("cumulative_reward: expected a number, got null",)),
        ("cumulative-string", ("cumulative_reward: expected a number, got 'x'",)),
        ("steps-number", ("steps: expected a list of steps, got 5",)),
        ("steps-strings", ("steps[0]: expected an object (a step), got 'a'",)),
        ("action-string", ("steps[0].action: expected an object (an action), got 'noop'",)),
        ("resolved-string", ("resolved: expected true or false, got 'yes'",)),
        ("status-unknown", ("status: expected one of ok, failed, got 'cancelled'",)),
    ],
)
def test_bad_field_types_get_one_line_and_exit_2(
    case: str, needles: tuple[str, ...], tiny_run: tuple[Path, list[dict[str, Any]]]
) -> None:
    record = tiny_run[1][1]
    changes: dict[str, Any] = {
        "reward-null": {"steps": _steps(record, 0, reward=None)},
        "reward-string": {"steps": _steps(record, 0, reward="x")},
        "reward-missing": {"steps": _steps(record, 0, "reward")},
        "done-string": {"steps": _steps(record, 0, done="yes")},
        "cumulative-null": {"cumulative_reward": None},
        "cumulative-string": {"cumulative_reward": "x"},
        "steps-number": {"steps": 5},
        "steps-strings": {"steps": ["a", "b"]},
        "action-string": {"steps": _steps(record, 0, action="noop")},
        "resolved-string": {"resolved": "yes"},
        "status-unknown": {"status": "cancelled"},
    }[case]
    proc = replay_tampered(tiny_run, case, **changes)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert_one_error_line(proc, f"{case}.jsonl: line 2: ", *needles)
    assert proc.stdout == ""


def test_a_failed_record_with_a_tampered_cumulative_reward_differs(
    tiny_run: tuple[Path, list[dict[str, Any]]],
) -> None:
    record = tiny_run[1][0]
    honest = replay_tampered(tiny_run, "failed-honest", status="failed")
    assert honest.returncode == 0, honest.stdout + honest.stderr
    proc = replay_tampered(tiny_run, "failed-tampered", status="failed", cumulative_reward=99999)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout.strip().splitlines()
    victim = tiny_run[1][1]
    assert len(out) == 2, proc.stdout
    assert out[0].startswith(f"episode {victim['episode_id']} ({victim['run_key']}) step ")
    assert "cumulative reward recorded 99999.0, replayed " in out[0]
    assert out[1].startswith("replay: 1 of 2 episodes differ")
    assert record["episode_id"] not in proc.stdout


class FailingEnvironment(ChaosOpsEnvironment):
    """Raises on the fourth step, as an environment bug would."""

    def step(self, action: Any) -> Any:
        if self.state.step_count == 3:
            raise RuntimeError("boom")
        return super().step(action)


def test_a_failed_episode_replays_and_its_cumulative_reward_is_checked() -> None:
    scenario = scenarios_for_tier("hard", episodes_per_type=1)[0]
    [result] = run_batch(
        [scenario],
        lambda sc: dict.fromkeys(AgentRole, random_policy(sc.seed)),
        env_factory=FailingEnvironment,
    )
    assert result.status == "failed" and len(result.steps) == 3
    record = result_record(result, policy="random", key="k")
    assert replay_records([record]) == (1, 3, [])
    record["cumulative_reward"] += 1.0
    _, _, mismatches = replay_records([record])
    assert [(m.step, m.what.split(",")[0]) for m in mismatches] == [
        (3, f"cumulative reward recorded {record['cumulative_reward']}")
    ]


def test_replay_of_a_file_with_no_episode_is_refused(tmp_path: Path) -> None:
    # Nothing checked is not "every reward matches".
    empty = tmp_path / "results.jsonl"
    empty.write_text("")
    proc = chaosops("replay", empty, cwd=tmp_path)
    assert proc.returncode == 2
    assert_one_error_line(proc, "results.jsonl", "holds no episode to replay")
