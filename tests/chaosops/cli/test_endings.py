"""Terminated and truncated, in the RL sense, in every output of a run: an
incident resolved terminates its episode, running out of steps truncates it."""

from __future__ import annotations

from pathlib import Path

from chaosops.agents.policies import random_policy
from chaosops.agents.runner import run_batch
from chaosops.curriculum.generator import scenarios_for_tier
from chaosops.env.environment import DEFAULT_TURN_ORDER

from ._cli import chaosops, jsonl


def test_results_and_trajectories_say_how_each_episode_ended(tmp_path: Path) -> None:
    for policy in ("oracle", "random"):
        out = tmp_path / policy
        done = chaosops("run", "--tier", "hard", "--limit", "6", "--policy", policy,
                        "--out", out, "--no-progress", cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
        results = jsonl(out / "results.jsonl")
        steps = {r["episode_id"]: [] for r in results}
        for record in jsonl(out / "trajectories.jsonl"):
            steps[record["episode_id"]].append(record)
        for result in results:
            assert result["terminated"] is result["resolved"]
            assert result["truncated"] is (not result["resolved"])
            for records in (result["steps"], steps[result["episode_id"]]):
                *before, last = records
                assert not any(s["terminated"] or s["truncated"] for s in before)
                assert (last["terminated"], last["truncated"]) == (
                    result["terminated"], result["truncated"],
                )  # fmt: skip
        ended = {(r["terminated"], r["truncated"]) for r in results}
        assert ended == ({(True, False)} if policy == "oracle" else {(False, True)})


def test_episode_results_say_it_too() -> None:
    scenarios = scenarios_for_tier("hard", episodes_per_type=1)[:3]
    results = run_batch(scenarios, lambda sc: dict.fromkeys(DEFAULT_TURN_ORDER, random_policy(1)))
    for result in results:
        assert result.terminated is result.resolved and result.truncated is not result.resolved
