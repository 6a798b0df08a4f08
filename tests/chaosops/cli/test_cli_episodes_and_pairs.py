"""``chaosops episodes`` (a run's episodes filtered and sorted) and the paired
comparison of two policies, in ``eval`` and in the viewer."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import orjson
import pytest

from ._cli import chaosops, jsonl, spawn, stop


@pytest.fixture(scope="module")
def random_run(work: Path) -> Path:
    out = work / "episodes-random"
    proc = chaosops("run", "--tier", "medium", "--episodes-per-type", "2", "--policy", "random",
                    "--no-progress", "--out", out, cwd=work)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out


def _listed(proc) -> list[list[str]]:
    assert proc.returncode == 0, proc.stderr
    header, *lines = proc.stdout.splitlines()
    assert header.split() == ["episode", "id", "policy", "outcome", "mttr", "steps", "reward"]
    return [line.split() for line in lines]


def test_episodes_filters_and_sorts_as_asked(work: Path, random_run: Path) -> None:
    records = jsonl(random_run / "results.jsonl")
    every = _listed(chaosops("episodes", random_run, cwd=work))
    assert len(every) == len(records)
    by_reward = _listed(chaosops("episodes", random_run, "--sort", "reward", "--desc", cwd=work))
    rewards = [float(row[-1]) for row in by_reward]
    assert rewards == sorted(rewards, reverse=True)
    assert rewards[0] == pytest.approx(max(r["cumulative_reward"] for r in records), abs=0.05)
    unresolved = _listed(chaosops("episodes", random_run, "--unresolved", cwd=work))
    assert len(unresolved) == sum(not r["resolved"] for r in records)
    assert all(row[3] == "unresolved" and row[4] == "-" for row in unresolved)
    resolved = _listed(chaosops("episodes", random_run, "--resolved", "--sort", "mttr", cwd=work))
    mttrs = [int(row[4]) for row in resolved]
    assert mttrs == sorted(mttrs) and len(resolved) + len(unresolved) == len(records)
    cascade = _listed(chaosops("episodes", random_run, "--failure-type", "cascade", cwd=work))
    assert cascade and all(row[0].startswith("cascade/medium/") for row in cascade)
    limited = chaosops("episodes", random_run, "--limit", "1", cwd=work)
    assert len(_listed(limited)) == 1 and f"1 of {len(records)} matching" in limited.stderr


def test_episodes_says_when_none_matches_and_refuses_unknown_values(
    work: Path, random_run: Path
) -> None:
    none = chaosops("episodes", random_run, "--tier", "easy", cwd=work)
    assert _listed(none) == [] and "none of the run's" in none.stderr
    refused = chaosops("episodes", random_run, "--tier", "ultra", cwd=work)
    assert refused.returncode == 2 and "'ultra'" in refused.stderr and "easy" in refused.stderr


def test_eval_pairs_each_policy_against_the_first(work: Path) -> None:
    out = work / "paired-eval"
    proc = chaosops("eval", "tiny.toml", "--policies", "random,oracle", "--no-progress",
                    "--no-chart", "--out", out, cwd=work)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "paired against random" in proc.stdout
    [pair] = orjson.loads((out / "eval.json").read_bytes())["paired"]
    rewards = {
        policy: {r["run_key"].split("/", 1)[1]: r["cumulative_reward"]
                 for r in jsonl(out / policy / "results.jsonl")}
        for policy in ("random", "oracle")
    }  # fmt: skip
    gaps = [rewards["oracle"][k] - rewards["random"][k] for k in rewards["random"]]
    assert pair["policy"] == "oracle" and pair["against"] == "random"
    assert pair["scenarios"] == len(gaps)
    assert pair["reward_difference"] == pytest.approx(sum(gaps) / len(gaps))
    low, high = pair["reward_interval"]
    assert low <= pair["reward_difference"] <= high


def test_the_viewer_says_when_two_runs_share_no_scenario(work: Path, random_run: Path) -> None:
    other = work / "episodes-other-seeds"
    proc = chaosops("run", "--tier", "medium", "--episodes-per-type", "1", "--seed-offset",
                    "1000", "--no-progress", "--out", other, cwd=work)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    server = spawn("view", random_run, other, "--port", "0", cwd=work)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split(" at ", 1)[1].split()[0].rstrip("/")
        with urllib.request.urlopen(f"{url}/compare?a=0&b=1", timeout=10) as answer:
            page = answer.read().decode()
    finally:
        stop(server)
        server.communicate()
    assert "0 scenario(s) played by both" in page
    assert "share no scenario (failure type, tier and seed)" in page
    assert 'id="paired"' not in page
