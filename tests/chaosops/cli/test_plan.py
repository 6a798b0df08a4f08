"""Unit tests of how the CLI plans episodes: suite files, deadlines and policy factories."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chaosops.agents.policies import heuristic_policy
from chaosops.cli import build_parser
from chaosops.cli._config import config_from_args
from chaosops.curriculum.generator import scenarios_for_tier
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import AgentRole
from chaosops.outputs import deadline_fields
from chaosops.runs import (
    Plan,
    PlannedEpisode,
    RunError,
    effective_timeout,
    policy_factory,
    timeout_groups,
)
from chaosops.runs.plan import suite_files
from chaosops.runs.spec import Deadlines

from ._cli import chaosops, jsonl

SRE, DEV = AgentRole.SRE, AgentRole.DEV


def args(*argv: str) -> Deadlines:
    return config_from_args(build_parser().parse_args(["run", *argv])).spec.deadlines


def test_suite_files_name_a_folder_without_suites_and_an_empty_path(tmp_path: Path) -> None:
    # the loader's own line, as for a bad entry of the folder
    with pytest.raises(RunError, match=rf"^{re.escape(str(tmp_path))}: folder holds no \*\.toml"):
        suite_files([str(tmp_path)])
    (tmp_path / "a.toml").symlink_to(tmp_path / "gone.toml")
    with pytest.raises(RunError, match=r"a\.toml: a link to a missing file"):
        suite_files([str(tmp_path)])
    with pytest.raises(RunError, match="no such scenario file or folder: ''"):
        suite_files([""])  # not the current folder


def test_deadline_precedence() -> None:
    suite = {SRE: 5.0}
    assert effective_timeout(args(), None) is None
    assert effective_timeout(args(), suite) == {SRE: 5.0}
    assert effective_timeout(args("--turn-timeout", "2"), suite) == 2.0
    both = effective_timeout(args("--turn-timeout", "2", "--role-timeout", "dev=0.5"), suite)
    assert both == {role: (0.5 if role is DEV else 2.0) for role in AgentRole}
    assert effective_timeout(args("--role-timeout", "dev=0.5"), suite) == {SRE: 5.0, DEV: 0.5}


def test_groups_keep_first_appearance_order() -> None:
    scenarios = scenarios_for_tier("easy", episodes_per_type=1)
    planned = Plan.listing(
        [
            PlannedEpisode(scenarios[0], {SRE: 1.0}),
            PlannedEpisode(scenarios[1]),
            PlannedEpisode(scenarios[2], {SRE: 1.0}),
        ]
    )
    groups = [
        ([i for span in spans for i in span], t) for spans, t in timeout_groups(args(), planned)
    ]
    assert groups == [([0, 2], {SRE: 1.0}), ([1], None)]


def test_factory_shares_one_policy_per_episode_seeded_by_scenario() -> None:
    scenario = scenarios_for_tier("hard", episodes_per_type=1)[3]
    roles = policy_factory("heuristic")(scenario)
    assert set(roles) == set(AgentRole)
    assert len({id(p) for p in roles.values()}) == 1
    # same draws as heuristic_policy(seed=scenario.seed)
    env_a, env_b = ChaosOpsEnvironment(), ChaosOpsEnvironment()
    obs_a, obs_b = env_a.reset(scenario=scenario), env_b.reset(scenario=scenario)
    reference = heuristic_policy(seed=scenario.seed)
    for _ in range(8):
        act_a = roles[obs_a.turn_role](obs_a, obs_a.turn_role)
        act_b = reference(obs_b, obs_b.turn_role)
        assert act_a.model_dump() == act_b.model_dump()
        obs_a, obs_b = env_a.step(act_a), env_b.step(act_b)
        if obs_a.done:
            break
    oracle = policy_factory("oracle")(scenario)
    assert len({id(p) for p in oracle.values()}) == 1


def test_an_empty_openai_base_url_is_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    from chaosops.cli._args import build_parser

    monkeypatch.setenv("OPENAI_BASE_URL", "")
    assert build_parser().parse_args(["run"]).llm_base_url == "http://127.0.0.1:8000/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://10.0.0.1:9000/v1")
    assert build_parser().parse_args(["run"]).llm_base_url == "http://10.0.0.1:9000/v1"


def test_llm_extra_body_cannot_set_the_policy_s_own_fields(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from chaosops.cli._args import build_parser

    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["run", "--llm-extra-body", '{"messages": []}'])
    assert info.value.code == 2
    assert "cannot set 'messages'" in capsys.readouterr().err
    args = build_parser().parse_args(["run", "--llm-extra-body", '{"top_k": 5}'])
    assert args.llm_extra_body == {"top_k": 5}


def test_deadline_fields_name_every_role() -> None:
    roles = [role.value for role in AgentRole]
    assert deadline_fields(None) is None
    assert deadline_fields(2) == dict.fromkeys(roles, 2.0)
    partial = deadline_fields({SRE: 5, "dev": 0.5})
    assert partial == {role: {"sre": 5.0, "dev": 0.5}.get(role) for role in roles}
    assert list(partial or {}) == roles  # the same keys in the same order, whatever was given
    assert deadline_fields({}) is None
    assert deadline_fields({SRE: None}) is None


def test_results_record_the_deadline_each_episode_ran_under(tmp_path: Path) -> None:
    # Two suite entries with different deadlines run as two batches; each
    # results line says which deadline its episode had, and --role-timeout
    # overrides one role of each.
    (tmp_path / "mixed.toml").write_text(
        'name = "mixed"\ndifficulty = "easy"\n\n'
        '[[scenarios]]\nfailure_type = "db_deadlock"\nseeds = [0]\n'
        "[scenarios.turn_timeout]\nsre = 5.0\nmanager = 7.5\n\n"
        '[[scenarios]]\nfailure_type = "memory_leak"\nseeds = [0]\n'
    )
    out = tmp_path / "out"
    proc = chaosops("run", "mixed.toml", "--no-progress", "--out", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    by_type = {r["failure_type"]: r["turn_timeout"] for r in jsonl(out / "results.jsonl")}
    assert by_type == {
        "db_deadlock": {"sre": 5.0, "oversight": None, "dev": None, "manager": 7.5},
        "memory_leak": None,
    }
    out2 = tmp_path / "out2"
    proc = chaosops(
        "run", "mixed.toml", "--no-progress", "--role-timeout", "dev=0.5", "--out", out2,
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    by_type = {r["failure_type"]: r["turn_timeout"] for r in jsonl(out2 / "results.jsonl")}
    assert by_type == {
        "db_deadlock": {"sre": 5.0, "oversight": None, "dev": 0.5, "manager": 7.5},
        "memory_leak": {"sre": None, "oversight": None, "dev": 0.5, "manager": None},
    }


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("https://user:s3cret@api.example.com/v1", "https://user:***@api.example.com/v1"),
        ("https://sk-token@api.example.com:8443/v1", "https://***@api.example.com:8443/v1"),
        ("http://[::1", "<invalid URL>"),
    ],
)
def test_a_url_is_shown_without_its_secrets(url: str, shown: str) -> None:
    from chaosops._urls import shown_url

    assert shown_url(url) == shown


def plan_of(*argv: str) -> Plan:
    from chaosops.runs.plan import plan_episodes

    return plan_episodes(config_from_args(build_parser().parse_args(["run", *argv])).spec)


@pytest.mark.parametrize(
    "argv",
    [(), ("--seed-offset", "3"), ("--episodes-per-type", "7", "--tier", "hard", "--limit", "20")],
    ids=["suites", "offset", "per-type"],
)
def test_plan_keys_are_the_listed_keys_and_find_their_positions(argv: tuple[str, ...]) -> None:
    from chaosops.outputs import plan_keys

    plan = plan_of(*argv)
    listed = [p.scenario for p in plan]
    keys = plan.keys("heuristic")
    assert list(keys) == plan_keys("heuristic", listed)
    assert [keys.position(key) for key in keys] == list(range(len(plan)))
    assert keys.position(keys[0].replace("heuristic/", "random/", 1)) is None
    assert keys.position(keys[0][:-1] + "9") is None  # an occurrence the plan lacks
    assert keys.position("not a key") is None


def test_a_suite_listing_a_scenario_twice_plans_it_twice(tmp_path: Path) -> None:
    (tmp_path / "twice.toml").write_text(
        'name = "twice"\ndifficulty = "easy"\n\n'
        '[[scenarios]]\nfailure_type = "db_deadlock"\nseeds = [4, 5, 4]\n'
    )
    plan = plan_of(str(tmp_path / "twice.toml"))
    keys = plan.keys("p")
    assert [k.split("/", 3)[3] for k in keys] == [
        "seed=4/max_steps=12/#0", "seed=5/max_steps=12/#0", "seed=4/max_steps=12/#1"
    ]  # fmt: skip
    assert [keys.position(k) for k in keys] == [0, 1, 2]


def test_a_large_plan_is_not_held_episode_by_episode() -> None:
    import tracemalloc

    plan_of("--episodes-per-type", "1").keys("oracle")[0]  # imports and suites read once
    tracemalloc.start()
    try:
        plan = plan_of("--episodes-per-type", "90000")  # 990,000 episodes
        keys = plan.keys("oracle")
        last = keys[len(plan) - 1]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(plan) == 990_000 and keys.position(last) == len(plan) - 1
    assert peak < 2_000_000, peak  # listed, it took about 300 bytes an episode
