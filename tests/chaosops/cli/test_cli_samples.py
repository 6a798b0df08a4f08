"""--samples K: each scenario played K times with policies seeded anew, and
pass@1 / pass@k with intervals in the table, summary.json, eval and the viewer."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import orjson

from chaosops.samples import pass_at_k

from ._cli import assert_one_error_line, chaosops, jsonl, viewed_page


def test_samples_repeat_each_scenario_with_fresh_policy_seeds(tmp_path: Path) -> None:
    out = tmp_path / "sampled"
    proc = chaosops("run", "--policy", "random", "--tier", "easy", "--samples", "3",
                    "--no-progress", "--out", out, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    records = jsonl(out / "results.jsonl")
    by_scenario: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        scenario, sample = record["run_key"].rsplit("/#", 1)
        by_scenario[scenario].append(record)
        assert sample in ("0", "1", "2")
    assert len(by_scenario) == 20 and all(len(v) == 3 for v in by_scenario.values())
    # the same incident each time, the policy's own draws differ
    actions = [[str([s["action"] for s in r["steps"]]) for r in v] for v in by_scenario.values()]
    assert sum(len(set(a)) > 1 for a in actions) >= 15
    (row,) = orjson.loads((out / "summary.json").read_bytes())["samples"]
    wins = [sum(r["resolved"] for r in v) for v in by_scenario.values()]
    assert row["k"] == 3 and row["scenarios"] == 20
    assert abs(row["pass_at_1"] - sum(c / 3 for c in wins) / 20) < 1e-9
    assert abs(row["pass_at_k"] - sum(pass_at_k(3, c, 3) for c in wins) / 20) < 1e-9
    assert row["pass_at_1_ci"][0] <= row["pass_at_1"] <= row["pass_at_1_ci"][1]
    assert len(row["by_scenario"]) == 20 and "reward_variance" in row["by_scenario"][0]
    assert "pass@1" in proc.stdout and "pass@k" in proc.stdout
    # a resumed run plays the samples it was started with
    again = chaosops("run", "--resume", "--out", out, "--samples", "2", cwd=tmp_path)
    assert_one_error_line(again, "--samples", "recorded 3", "given 2")
    _, page = viewed_page(tmp_path, out)
    assert 'id="samples"' in page and "pass@1" in page


def test_a_run_file_and_eval_take_samples(tmp_path: Path) -> None:
    (tmp_path / "sampled.toml").write_text('samples = 2\ntiers = ["easy"]\npolicy = "random"\n')
    proc = chaosops("run", "--config", "sampled.toml", "--no-progress", "--out",
                    tmp_path / "file", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert len(jsonl(tmp_path / "file" / "results.jsonl")) == 40  # 20 easy scenarios, twice
    evaluated = chaosops("eval", "--policies", "random,oracle", "--tier", "easy", "--samples",
                         "2", "--no-progress", "--no-chart", "--out", tmp_path / "eval",
                         cwd=tmp_path)  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr
    data = orjson.loads((tmp_path / "eval" / "eval.json").read_bytes())
    assert {r["policy"] for r in data["samples"]} == {"random", "oracle"}
    oracle = next(r for r in data["samples"] if r["policy"] == "oracle")
    assert oracle["pass_at_1"] == oracle["pass_at_k"] == 1.0  # it knows the answer


def test_pass_at_1_intervals_stay_within_0_and_1_and_have_width(tmp_path: Path) -> None:
    out = tmp_path / "agree"
    proc = chaosops("run", "--tier", "hard", "--samples", "4", "--failure-type",
                    "rogue_deploy_bot", "--no-progress", "--out", out, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (row,) = orjson.loads((out / "summary.json").read_bytes())["samples"]
    for name in ("pass_at_1", "pass_at_k"):
        low, high = row[f"{name}_ci"]
        assert 0.0 <= low <= row[name] <= high <= 1.0 and high - low > 0.1, row
    assert "(0%-0%)" not in proc.stdout and "(100%-100%)" not in proc.stdout


def test_eval_with_samples_draws_pass_at_k_beside_the_reward_chart(tmp_path: Path) -> None:
    out = tmp_path / "ev"
    proc = chaosops("eval", "--policies", "random,heuristic", "--tier", "easy", "--samples", "2",
                    "--limit", "4", "--no-progress", "--out", out, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for name in ("eval_reward_by_tier.png", "eval_pass_at_k_by_tier.png"):
        assert (tmp_path / "ev" / name).read_bytes()[:4] == b"\x89PNG", name
        assert f"wrote {tmp_path / 'ev' / name}" in proc.stderr
