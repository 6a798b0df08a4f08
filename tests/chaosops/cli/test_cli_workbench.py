"""The command as a workbench: its version, the table in an 80-column terminal,
a base URL without a scheme refused as bad input."""

from __future__ import annotations

import math
import statistics
import subprocess
import sys
from collections import Counter
from importlib.metadata import version
from pathlib import Path

import orjson
import pytest

from ._cli import (
    TIMEOUT,
    TINY_SUITE,
    assert_one_error_line,
    chaosops,
    cli_env,
    command,
    jsonl,
    killed_run,
    llm_run,
)


def test_version() -> None:
    proc = subprocess.run(
        [command(), "--version"], capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"chaosops {version('chaosops')}"
    imported = subprocess.run(
        [sys.executable, "-c", "import chaosops; print(chaosops.__version__)"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=True,
    )
    assert imported.stdout.strip() == version("chaosops")


def test_the_eval_table_fits_80_columns_and_cuts_no_number(work: Path) -> None:
    env = {**cli_env(), "COLUMNS": "80"}
    out = work / "eval-80"
    proc = subprocess.run(
        [
            command(),
            "eval",
            "tiny.toml",
            "--episodes-per-type",
            "2",
            "--no-progress",
            "--no-chart",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines and max(len(line) for line in lines) <= 80, proc.stdout
    assert "…" not in proc.stdout
    rows = orjson.loads((out / "eval.json").read_bytes())["rows"]
    policies = {"random", "heuristic", "oracle"}
    after = ("paired against", "turns by role")  # the tables below the evaluation's own
    main = lines[: lines.index(next(line for line in lines if line.startswith(after)))]
    table = [line.split() for line in main if line.split()[:1] and line.split()[0] in policies]
    assert len(table) == len(rows) == 3  # one tier (easy) for each policy
    for cells in table:
        row = next(r for r in rows if r["policy"] == cells[0])
        assert cells[1] == row["tier"] and int(cells[2]) == row["episodes"]
        assert float(cells[7]) == pytest.approx(row["mean_reward"], abs=0.05)


@pytest.mark.parametrize("url", ["127.0.0.1:8000/v1", "localhost/v1", "http:///v1"])
def test_a_base_url_without_a_scheme_or_host_is_bad_input(work: Path, url: str) -> None:
    proc = chaosops(
        "run", "tiny.toml", "--policy", "llm", "--llm-base-url", url, "--out", work / "bad-url",
        cwd=work,
    )  # fmt: skip
    assert proc.returncode == 2
    assert_one_error_line(proc, "--llm-base-url", repr(url), "http://127.0.0.1:8000/v1")
    assert not (work / "bad-url").exists()


def test_a_run_whose_turns_timed_out_says_how_many(work: Path, mock_llm: str) -> None:
    out = work / "all-late"
    proc = chaosops(
        "run", "tiny.toml", "--episodes-per-type", "1", "--no-progress", "--policy", "llm",
        "--llm-base-url", mock_llm, "--turn-timeout", "0.02", "--llm-max-failures", "0",
        "--out", out, cwd=work,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # no role played a move of its own
    steps = [orjson.loads(line) for line in (out / "trajectories.jsonl").read_bytes().splitlines()]
    late = sum(1 for step in steps if step["timed_out"])
    assert late == len(steps) > 0  # the mock answers in 80 ms
    notes = [line for line in proc.stderr.splitlines() if "turn(s) timed out" in line]
    by_role = ", ".join(f"{role} {n}" for role, n in Counter(s["role"] for s in steps).items())
    assert notes == [
        f"chaosops: {late} turn(s) timed out ({by_role}) and played the fallback; see "
        "'timed_out' in trajectories.jsonl, and --turn-timeout / --role-timeout"
    ]
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert {f["role"]: f["timeouts"] for f in summary["roles"]} == Counter(s["role"] for s in steps)


def test_the_summary_s_intervals_and_role_figures_by_hand(work: Path) -> None:
    out = work / "figures"
    env = {**cli_env(), "COLUMNS": "80"}
    proc = subprocess.run(
        [command(), "run", "--tier", "hard", "--no-progress", "--out", str(out)],
        capture_output=True, text=True, cwd=work, env=env, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80 and "…" not in proc.stdout
    results = jsonl(out / "results.jsonl")
    (row,) = orjson.loads((out / "summary.json").read_bytes())["rows"]
    n, k = len(results), sum(r["resolved"] for r in results)
    z = 1.959964
    p = k / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    wilson = [(centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)]
    assert row["success_rate_ci"] == pytest.approx(wilson, abs=1e-5)
    rewards = [r["cumulative_reward"] for r in results]
    mean, sd = statistics.fmean(rewards), statistics.stdev(rewards)
    assert n == 20  # the canonical hard suite
    t = 2.0930  # t(0.975, 19), from tables
    half = t * sd / math.sqrt(n)
    assert row["mean_reward_ci"] == pytest.approx([mean - half, mean + half], abs=1e-3)
    summary = orjson.loads((out / "summary.json").read_bytes())
    for figures in summary["roles"]:
        steps = [s for r in results for s in r["steps"] if s["role"] == figures["role"]]
        latencies = sorted(s["latency_ms"] for s in steps)
        assert figures["turns"] == len(steps) and figures["tokens"] is None
        assert figures["latency_p50_ms"] == latencies[math.ceil(len(latencies) / 2) - 1]
        assert figures["latency_p99_ms"] == latencies[math.ceil(0.99 * len(latencies)) - 1]
    shown = [line.split() for line in proc.stdout.splitlines()]
    assert f"{wilson[0] * 100:.0f}-{wilson[1] * 100:.0f}" in {c for cells in shown for c in cells}


def _played(out: Path) -> list[tuple[str, str]]:
    records = [orjson.loads(line) for line in (out / "results.jsonl").read_bytes().splitlines()]
    return [(r["difficulty"], r["failure_type"]) for r in records]


def test_quick_subsets_of_the_canonical_suites(work: Path) -> None:
    out = work / "subset"
    proc = chaosops(
        "run", "--tier", "medium", "--tier", "hard", "--failure-type", "cascade",
        "--no-progress", "--out", out, cwd=work,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    played = _played(out)
    assert played and set(played) == {("medium", "cascade"), ("hard", "cascade")}
    limited = work / "limited"
    proc = chaosops("run", "--limit", "3", "--no-progress", "--out", limited, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert _played(limited) == [("easy", "db_deadlock")] * 3  # the plan's first three
    # --resume keeps the subset: another one is refused, naming the option
    again = chaosops("run", "--resume", "--limit", "4", "--out", limited, cwd=work)
    assert again.returncode == 2
    assert_one_error_line(again, "--limit differs", "recorded 3, given 4")


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (("--failure-type", "db_dedlock"), ("--failure-type", "'db_dedlock'", "db_deadlock")),
        (("--tier", "extreme"), ("--tier", "'extreme'", "easy")),
        (("--limit", "0"), ("--limit", ">= 1")),
        (("--tier", "easy", "--failure-type", "rogue_deploy_bot"),
         ("no scenario", "--tier easy --failure-type rogue_deploy_bot")),
    ],
)  # fmt: skip
def test_a_subset_that_is_bad_or_empty_is_refused(
    work: Path, argv: tuple[str, ...], needles: tuple[str, ...]
) -> None:
    proc = chaosops("run", *argv, "--out", work / "no-subset", cwd=work)
    assert proc.returncode == 2
    assert_one_error_line(proc, *needles)
    assert not (work / "no-subset").exists()


def test_resume_alone_after_sigkill_takes_the_run_s_options(work: Path, mock_llm: str) -> None:
    # Started with a subset, a seed offset, deadlines, sampling settings and an
    # endpoint; resumed with the folder alone.
    out = work / "resume-alone"
    options = [
        *("--tier", "easy", "--limit", "10", "--seed-offset", "7"),
        *("--turn-timeout", "5", "--role-timeout", "dev=4"),
        *("--temperature", "0.5", "--max-tokens", "200"),
    ]
    killed_run(*llm_run(work, mock_llm, out, *options), cwd=work, out=out, after=2)
    assert 2 <= len(jsonl(out / "results.jsonl")) < 10
    # the recorded endpoint, not the default one (http://127.0.0.1:8000/v1)
    resumed = chaosops("run", "--resume", "--out", out, "--no-progress", cwd=work)
    assert resumed.returncode == 0, resumed.stderr
    assert f"chaosops-mock at {mock_llm} answers in" in resumed.stderr
    assert "resuming" in resumed.stderr
    results = jsonl(out / "results.jsonl")
    assert len(results) == 10 and {r["policy"] for r in results} == {"llm"}
    clean = work / "resume-alone-clean"
    ran = chaosops(*llm_run(work, mock_llm, clean, *options), cwd=work)
    assert ran.returncode == 0, ran.stderr
    assert sorted(r["run_key"] for r in results) == sorted(
        r["run_key"] for r in jsonl(clean / "results.jsonl")
    )  # the same plan: the subset, and the seeds moved by the offset
    assert {r["turn_timeout"]["dev"] for r in results} == {4.0}
    assert {r["turn_timeout"]["sre"] for r in results} == {5.0}
    # a conflicting option is refused, naming it
    other = chaosops("run", "--resume", "--out", out, "--temperature", "0.9", cwd=work)
    assert other.returncode == 2
    assert_one_error_line(other, "--temperature", "recorded 0.5", "given 0.9")
    moved = chaosops("run", "--resume", "--out", out, "--llm-base-url",
                     "http://127.0.0.1:9/v1", cwd=work)  # fmt: skip
    assert moved.returncode == 2
    assert_one_error_line(moved, "--llm-base-url", f"recorded {mock_llm}",
                          "given http://127.0.0.1:9/v1")  # fmt: skip


def test_runs_without_out_get_their_own_folders_and_latest_follows(tmp_path: Path) -> None:
    (tmp_path / "tiny.toml").write_text(TINY_SUITE)
    made = []
    for _ in range(2):
        proc = chaosops("run", "tiny.toml", "--limit", "1", "--no-progress", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        made.append(sorted(p.name for p in (tmp_path / "runs").iterdir() if p.name != "latest"))
    assert len(made[0]) == 1 and len(made[1]) == 2  # the second run did not collide
    newest = next(name for name in made[1] if name not in made[0])
    assert "-heuristic" in newest  # runs/<UTC time>-heuristic, "-2" within one second
    latest = tmp_path / "runs" / "latest"
    assert latest.is_symlink() and latest.resolve() == (tmp_path / "runs" / newest).resolve()
    assert len(jsonl(latest / "results.jsonl")) == 1
    resumed = chaosops("run", "--resume", "--no-progress", cwd=tmp_path)  # runs/latest
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming runs/{newest}: 1 of 1 episodes already done" in resumed.stderr


def test_resume_without_a_run_to_continue_is_refused(tmp_path: Path) -> None:
    proc = chaosops("run", "--resume", cwd=tmp_path)
    assert proc.returncode == 2
    assert_one_error_line(proc, "--resume", "runs/latest", "--out")
    assert not (tmp_path / "runs").exists()
    (tmp_path / "empty").mkdir()
    for folder in ("does-not-exist", "empty"):
        proc = chaosops("run", "--resume", "--out", folder, cwd=tmp_path)
        assert proc.returncode == 2
        assert_one_error_line(proc, "--resume", folder, "holds no run to resume")
    assert not (tmp_path / "does-not-exist").exists()
    assert not list((tmp_path / "empty").iterdir())


USER_POLICIES = """\
from chaosops.env.models import ActionType, ChaosOpsAction


def escalate(observation, role):
    return ChaosOpsAction(role=role, action_type=ActionType.ESCALATE)


async def escalate_later(observation, role):
    return ChaosOpsAction(role=role, action_type=ActionType.ESCALATE)


def only_dev(scenario):
    return {"dev": escalate}


def no_map(scenario):
    return "nothing"


not_callable = 3
"""


@pytest.fixture(scope="module")
def user_policies(work: Path) -> Path:
    (work / "user_policies.py").write_text(USER_POLICIES)
    return work


def _actions(out: Path) -> dict[str, set[str]]:
    by_role: dict[str, set[str]] = {}
    for step in jsonl(out / "trajectories.jsonl"):
        by_role.setdefault(step["role"], set()).add(step["action"]["action_type"])
    return by_role


def test_a_policy_per_role(user_policies: Path) -> None:
    work = user_policies
    out = work / "per-role"
    proc = chaosops(
        "run", "tiny.toml", "--episodes-per-type", "1", "--no-progress", "--out", out,
        "--role-policy", "sre=user_policies:escalate_later",
        "--role-policy", "oversight=oracle",
        "--role-policy", "dev=user_policies:escalate",
        "--role-policy", "manager=user_policies:escalate", cwd=work,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    label = (
        "heuristic+sre=user_policies:escalate_later+oversight=oracle"
        "+dev=user_policies:escalate+manager=user_policies:escalate"
    )
    assert {r["policy"] for r in jsonl(out / "results.jsonl")} == {label}
    actions = _actions(out)
    # sync and async policies of the user's own module, and the oracle for oversight
    assert actions["sre"] == actions["dev"] == actions["manager"] == {"escalate"}
    assert "escalate" not in actions["oversight"]
    options = orjson.loads((out / "run.json").read_bytes())
    assert options["policy"] == "heuristic"
    assert options["role_policies"] == {
        "sre": "user_policies:escalate_later",
        "oversight": "oracle",
        "dev": "user_policies:escalate",
        "manager": "user_policies:escalate",
    }
    resumed = chaosops("run", "--resume", "--out", out, "--no-progress", cwd=work)
    assert resumed.returncode == 0, resumed.stderr  # the roles' policies from run.json


def test_a_factory_per_role_and_the_roles_it_leaves_out(user_policies: Path) -> None:
    work = user_policies
    out = work / "per-role-factory"
    proc = chaosops(
        "run", "tiny.toml", "--episodes-per-type", "1", "--no-progress", "--out", out,
        "--policy", "oracle", "--role-policy", "dev=user_policies:only_dev", cwd=work,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert _actions(out)["dev"] == {"escalate"}


@pytest.mark.parametrize(
    ("value", "needles"),
    [
        ("dev=no_such_module:x", ("dev=no_such_module:x", "cannot import", "ModuleNotFoundError")),
        ("dev=user_policies:missing", ("cannot import", "no attribute 'missing'")),
        ("dev=user_policies:not_callable", ("not a policy (observation, role)",)),
        ("dev=user_policies:no_map", ("returned no mapping",)),
        ("dev=heurisitc", ("unknown policy 'heurisitc'", "heuristic", "module:attribute")),
        ("boss=oracle", ("--role-policy", "'boss=oracle'", "sre")),
        ("dev=", ("--role-policy", "'dev='")),
    ],
)
def test_a_bad_role_policy_is_one_line_and_writes_nothing(
    user_policies: Path, value: str, needles: tuple[str, ...]
) -> None:
    out = user_policies / "bad-role-policy"
    proc = chaosops("run", "tiny.toml", "--role-policy", value, "--out", out, cwd=user_policies)
    assert proc.returncode == 2
    assert_one_error_line(proc, *needles)
    assert not out.exists()


def test_resume_keeps_one_of_a_repeated_line_and_reruns_a_damaged_episode(work: Path) -> None:
    out = work / "damaged"
    proc = chaosops("run", "tiny.toml", "--episodes-per-type", "3", "--no-progress",
                    "--out", out, cwd=work)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = (out / "results.jsonl").read_bytes().splitlines(keepends=True)
    lines = (out / "trajectories.jsonl").read_bytes().splitlines(keepends=True)
    victim = orjson.loads(results[2])
    damaged = next(i for i, line in enumerate(lines) if orjson.loads(line)["episode_id"]
                   == victim["episode_id"])  # fmt: skip
    lines[damaged] = b'{"episode_id": "' + lines[damaged][16:40] + b"\n"  # cut mid-line
    (out / "trajectories.jsonl").write_bytes(b"".join(lines))
    (out / "results.jsonl").write_bytes(b"".join([*results, results[0]]))  # a line twice
    resumed = chaosops("run", "--resume", "--out", out, "--no-progress", cwd=work)
    assert resumed.returncode == 0, resumed.stderr
    assert "1 repeated results line(s) dropped" in resumed.stderr
    assert "1 episode(s) whose trajectory lost a line run again" in resumed.stderr
    after = jsonl(out / "results.jsonl")
    keys = [r["run_key"] for r in after]
    assert len(keys) == len(set(keys)) == 6
    assert keys[-1] == victim["run_key"]  # played again, at the end
    steps = jsonl(out / "trajectories.jsonl")
    assert len(steps) == sum(len(r["steps"]) for r in after)
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["episodes"] == summary["planned"] == 6 and summary["complete"]
