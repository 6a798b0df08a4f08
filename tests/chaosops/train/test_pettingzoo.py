"""The PettingZoo AEC environment: PettingZoo's own api_test, terminations
apart from truncations, rewards that sum to the episode's, masks of legal moves."""

from __future__ import annotations

import warnings

import pytest

from chaosops.env.models import ChaosOpsAction, FailureType
from tests._needs import needs

try:
    from pettingzoo.test import api_test

    from chaosops.env.pettingzoo import MOVES, aec_env
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
    env = aec_env(failure_type="rogue_deploy_bot", difficulty="hard")
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
