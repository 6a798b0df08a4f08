"""The PettingZoo AEC environment: PettingZoo's own api_test, terminations
apart from truncations, rewards that sum to the episode's, masks of legal moves."""

from __future__ import annotations

import warnings

import pytest

from chaosops.env.models import ChaosOpsAction, FailureType
from tests._needs import needs

try:
    from pettingzoo.test import api_test

    from chaosops.train.pettingzoo import MOVES, aec_env
except ImportError:  # pragma: no cover - the test extra installs pettingzoo
    api_test = None


@pytest.fixture(autouse=True)
def _pettingzoo() -> None:
    needs(api_test, "pettingzoo", "pip install -e '.[test]' (or the 'pettingzoo' extra)")


@pytest.mark.parametrize("failure_type", [None, "db_deadlock", "rogue_deploy_bot"])
def test_api_test_passes(failure_type: str | None) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its advice (agent names like player_0, Box spaces)
        api_test(aec_env(failure_type=failure_type, difficulty="hard"), num_cycles=300)


def _play(env, choose) -> tuple[dict[str, float], dict[str, bool], dict[str, bool]]:
    """Play to the end; each agent's summed rewards and how it ended."""
    totals = dict.fromkeys(env.possible_agents, 0.0)
    ended: dict[str, tuple[bool, bool]] = {}
    for agent in env.agent_iter():
        obs, reward, terminated, truncated, info = env.last()
        totals[agent] += reward
        if terminated or truncated:
            ended[agent] = (terminated, truncated)
            env.step(None)
            continue
        env.step(choose(obs, info))
    terminations = {a: t for a, (t, _) in ended.items()}
    truncations = {a: t for a, (_, t) in ended.items()}
    return totals, terminations, truncations


def _index(kind: str, **fields) -> int:
    return next(
        i for i, move in enumerate(MOVES)
        if move["action_type"] == kind and all(move.get(k) == v for k, v in fields.items())
    )  # fmt: skip


def test_out_of_steps_is_a_truncation_and_rewards_sum_to_the_episodes() -> None:
    env = aec_env(failure_type="memory_leak", max_steps=8)
    env.reset(seed=4)
    noop = _index("noop")
    totals, terminations, truncations = _play(env, lambda obs, info: noop)
    episode = env.env.state.cumulative_reward
    assert episode < 0 and all(t == pytest.approx(episode) for t in totals.values())
    assert not any(terminations.values()) and all(truncations.values())
    assert sorted(truncations) == sorted(env.possible_agents) and env.agents == []


def test_a_resolved_incident_is_a_termination() -> None:
    env = aec_env(failure_type="db_deadlock")
    env.reset(seed=0)
    fix = _index("restart", target="db")
    noop = _index("noop")
    totals, terminations, truncations = _play(
        env, lambda obs, info: fix if obs["action_mask"][fix] else noop
    )
    assert env.env.state.resolved
    assert all(terminations.values()) and not any(truncations.values())
    assert all(t == pytest.approx(env.env.state.cumulative_reward) for t in totals.values())


def test_the_mask_is_the_legal_moves_and_the_text_is_the_acting_agents_view() -> None:
    env = aec_env(failure_type="rogue_deploy_bot", difficulty="hard", text=True)
    env.reset(seed=2)
    seen_roles = set()
    for agent in env.agent_iter(8):
        obs, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        mask = obs["action_mask"]
        legal = {MOVES[i]["action_type"] for i in range(len(MOVES)) if mask[i]}
        assert ("flag_rogue" in legal) == (agent == "oversight")
        assert ("resolve" in legal) == (agent == "manager")
        assert f"Your role: {agent}" in info["text"]
        seen_roles.add(agent)
        kinds = {ChaosOpsAction(role=agent, **move).action_type.value for move in MOVES}
        assert legal < kinds and {"noop", "escalate", "identify_root_cause"} <= legal
        env.step(int(mask.nonzero()[0][0]))
    assert seen_roles == set(env.possible_agents)


def test_every_failure_type_plays_with_random_legal_moves() -> None:
    env = aec_env(difficulty="medium")
    for seed, failure in enumerate(FailureType):
        env.reset(seed=seed, options={"failure_type": failure.value})
        assert env.env.state.failure_type is failure
        space = env.action_space(env.agent_selection)
        space.seed(seed)
        _play(env, lambda obs, info, space=space: space.sample(obs["action_mask"]))
        assert env.agents == []


@pytest.mark.parametrize("action", [-30, -1, 36, 99, "restart", 1.0, True, None, [0]])
def test_an_action_that_is_no_move_is_one_value_error_naming_the_range(action) -> None:
    env = aec_env(failure_type="db_deadlock")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"an int from 0 to 35") as raised:
        env.step(action)
    assert "\n" not in str(raised.value)
    assert env.env.state.step_count == 0  # nothing was applied


def test_stepping_or_observing_before_reset_is_a_value_error() -> None:
    env = aec_env()
    for call in (lambda: env.step(0), lambda: env.last(), lambda: env.observe("sre")):
        with pytest.raises(ValueError, match=r"reset\(\) before"):
            call()


def test_a_masked_move_plays_the_fallback_and_never_beats_a_noop() -> None:
    """On every canonical row, each role sending only masked moves ends the
    episode exactly as its noops would (the others noop too)."""
    from chaosops.train import rows

    noop = _index("noop")
    for row in rows(others=None):
        env = aec_env(failure_type=row["failure_type"], difficulty=row["difficulty"],
                      max_steps=row["max_steps"])  # fmt: skip
        env.reset(seed=row["seed"])
        _play(env, lambda obs, info: noop)
        fallback = env.env.state.cumulative_reward
        for role in env.possible_agents:

            def masked(obs, info, role=role, env=env):
                if env.agent_selection != role:
                    return noop
                assert not obs["action_mask"].all()  # some move is always masked
                return int(obs["action_mask"].argmin())

            env.reset(seed=row["seed"])
            _play(env, masked)
            assert env.env.state.cumulative_reward == pytest.approx(fallback), (row, role)


def test_the_text_view_is_in_infos_only_when_asked_for() -> None:
    plain, texted = aec_env(failure_type="db_deadlock"), aec_env(failure_type="db_deadlock",
                                                                 text=True)  # fmt: skip
    for env in (plain, texted):
        env.reset(seed=0)
    assert "text" not in plain.last()[-1]
    assert "Your role: sre" in texted.last()[-1]["text"]
    texted.step(_index("noop"))
    assert "Your role: oversight" in texted.last()[-1]["text"]


def test_the_scenario_s_fields_are_checked_as_a_suite_entry_s() -> None:
    with pytest.raises(ValueError, match="max_steps: Input should be greater than or equal to 1"):
        aec_env(max_steps=0)
    with pytest.raises(ValueError, match="unknown failure type 'db_dedlock'; valid: db_deadlock"):
        aec_env(failure_type="db_dedlock")
    env = aec_env()
    with pytest.raises(ValueError, match="seed: Input should be greater than or equal to 0"):
        env.reset(seed=-1)
    with pytest.raises(ValueError, match="max_steps: Input should be less than or equal to"):
        env.reset(seed=0, options={"max_steps": 10**9})


@pytest.mark.parametrize("agent", ["sre", "dev", "manager"])
def test_the_logs_a_view_shows_are_counted_and_set_the_tiers_apart(agent: str) -> None:
    """Each role's log lines, by service and level, as its view shows them: the
    hard tier's misleading lines make its openings differ from the medium's."""
    from chaosops.env.models import SERVICE_NAMES
    from chaosops.train.pettingzoo import LOG_LEVELS

    seen = {}
    for tier in ("medium", "hard"):
        env = aec_env(failure_type="cascade", difficulty=tier)
        env.reset(seed=5)
        logs = env.observe(agent)["observation"]["logs"]
        view = env.env.world.project_view(agent)
        expected = [[sum(1 for line in view.visible_logs if (line.service, line.level) == (s, lv))
                     for lv in LOG_LEVELS] for s in SERVICE_NAMES]  # fmt: skip
        assert logs.tolist() == expected
        seen[tier] = logs.sum()
    if agent == "manager":  # a manager's view shows no logs
        assert seen == {"medium": 0, "hard": 0}
    elif agent == "dev":  # the last three of the six public logs
        assert seen == {"medium": 3, "hard": 3}
    else:
        assert seen["hard"] > seen["medium"] > 0
