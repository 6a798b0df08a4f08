"""The trainers' adapters step the runtime's engine: deadlines with their
fallback for the others, async others inside a harness's own event loop, an
LLMPolicy as a teammate, and the runtime's records of every turn."""

from __future__ import annotations

import asyncio
import re
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from chaosops.agents.llm import LLMPolicy
from chaosops.agents.policies import heuristic_policy
from chaosops.agents.runner import run_episode
from chaosops.agents.seated import SeatedEpisode
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction
from chaosops.env.world_sim import Scenario
from chaosops.train.trl import ChaosOpsToolEnv
from tests.chaosops.cli._cli import mock_process

ROW = {"failure_type": "dns_outage", "seed": 4, "role": "sre", "difficulty": "easy"}


async def _hangs(obs: Any, role: AgentRole) -> ChaosOpsAction:
    await asyncio.sleep(3600)
    raise AssertionError("never answered")


def _noops(others: Any, turn_timeout: float) -> tuple[Any, list[Any]]:
    """ROW played by noops, ``others`` in the other seats: its record, and the dev's steps."""
    with ChaosOpsToolEnv(others=others, turn_timeout=turn_timeout) as env:
        env.reset(**ROW)
        while not env.done:
            env.noop()
        result = env.result
    assert result is not None
    return result, [step for step in result.steps if step.role == AgentRole.DEV]


def test_a_hung_teammate_plays_the_fallback_at_its_deadline() -> None:
    started = time.monotonic()
    hung = {"oversight": "heuristic", "dev": _hangs, "manager": "heuristic"}
    result, dev = _noops(hung, turn_timeout=0.05)
    assert dev and all(s.timed_out and s.action.action_type == ActionType.NOOP for s in dev)
    assert result.timeouts == len(dev)
    assert not any(s.timed_out for s in result.steps if s.role != AgentRole.DEV)
    assert time.monotonic() - started < 0.05 * len(dev) + 60  # nobody waited an hour


def test_the_record_is_the_runtimes_own_episode() -> None:
    scenario = Scenario.from_type("dns_outage", seed=4)
    with ChaosOpsToolEnv() as env:
        env.reset(**ROW)
        while not env.done:
            env.noop()
        result = env.result
    scripted = heuristic_policy(scenario.seed)
    policies = {role: scripted for role in AgentRole if role != AgentRole.SRE}
    expected = run_episode(ChaosOpsEnvironment(), scenario, policies)
    assert result is not None
    assert [s.action for s in result.steps] == [s.action for s in expected.steps]
    assert result.cumulative_reward == expected.cumulative_reward
    assert env.get_reward() == expected.cumulative_reward


@pytest.mark.asyncio
async def test_async_others_play_inside_the_callers_running_loop() -> None:
    scripted = heuristic_policy(seed=4)

    async def others(obs: Any, role: AgentRole) -> ChaosOpsAction:
        await asyncio.sleep(0)
        return scripted(obs, role)

    # a harness's own loop runs in this thread: the episode plays on the engine's
    with ChaosOpsToolEnv(others=others) as env, ChaosOpsToolEnv() as same:
        assert env.reset(**ROW) == same.reset(**ROW)
        while not same.done:
            assert env.noop() == same.noop()
        assert env.get_reward() == same.get_reward()


def test_an_llm_policy_plays_a_teammate(tmp_path: Path) -> None:
    with mock_process(tmp_path, "--latency", "1ms") as url:
        llm = LLMPolicy("chaosops-mock", base_url=url)
        others = {"oversight": "heuristic", "dev": llm, "manager": "heuristic"}
        result, dev = _noops(others, turn_timeout=30.0)
    assert dev and all(step.info.get("completion") for step in dev)  # the model's answers
    assert result.timeouts == 0 and result.errors == 0


def test_a_seat_is_judged_before_its_move_is_handed_over() -> None:
    episode = SeatedEpisode("heuristic", frozenset({AgentRole.SRE}))
    opening = episode.start(Scenario.from_type("dns_outage", seed=4))
    with pytest.raises(Exception, match="illegal move"):
        episode.play(ChaosOpsAction(role=AgentRole.SRE, action_type="resolve"))
    assert episode.now == opening  # the turn is still open, unplayed
    episode.finish()
    assert episode.result().status == "ok"
    assert all(s.action.action_type == ActionType.NOOP for s in episode.result().steps
               if s.role == AgentRole.SRE)  # fmt: skip


def test_pettingzoo_agents_are_seats_and_others_keep_their_deadline() -> None:
    from pettingzoo.test import api_test

    from chaosops.train.pettingzoo import aec_env

    others = {"dev": _hangs, "manager": "heuristic"}
    env = aec_env(failure_type="dns_outage", others=others, turn_timeout=0.05)
    assert env.possible_agents == ["sre", "oversight"]
    env.reset(seed=2)
    for _agent in env.agent_iter():
        _, _, terminated, truncated, _ = env.last()
        env.step(None if terminated or truncated else 0)
    result = env.episode.result()
    dev = [step for step in result.steps if step.role == AgentRole.DEV]
    assert dev and all(step.timed_out for step in dev)
    env.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its advice (agent names like player_0, Box spaces)
        api_test(aec_env(others={"manager": "oracle"}), num_cycles=20)


def test_pettingzoo_with_others_ends_on_an_agent_for_every_failure_type() -> None:
    from chaosops.env.models import FailureType
    from chaosops.train.pettingzoo import aec_env

    for failure in FailureType:
        env = aec_env(failure_type=failure.value, others={"manager": "oracle", "dev": "oracle"})
        env.reset(seed=1)
        for agent in env.agent_iter():
            assert agent in ("sre", "oversight")
            _, _, terminated, truncated, _ = env.last()
            env.step(None if terminated or truncated else 0)
        env.close()


def test_the_adapters_refuse_bad_input_in_one_value_error_each() -> None:
    from chaosops.train.pettingzoo import aec_env

    env = aec_env(failure_type="db_deadlock")
    refusals = [
        (lambda: env.reset(options="hard"), "options='hard': a dict"),
        (lambda: env.reset(seed="x"), "seed='x': an int"),
        (lambda: env.reset(options={"difficutly": "hard"}), "no key 'difficutly'"),
        (lambda: env.action_space("ceo"), "agent 'ceo': the agents are"),
        (lambda: env.observation_space("ceo"), "agent 'ceo'"),
        (lambda: aec_env(render_mode="human"), "render_mode='human'"),
        (lambda: ChaosOpsToolEnv(others=42), "42 is no policy"),
        (lambda: ChaosOpsToolEnv(others={"ceo": "heuristic"}), "no role 'ceo'"),
        (lambda: ChaosOpsToolEnv(others="smart"), "'smart' is no policy"),
        (
            lambda: ChaosOpsToolEnv(others="oracle", base_url="http://127.0.0.1:9"),
            "beside base_url",
        ),
        (lambda: ChaosOpsToolEnv().reset(role="ceo"), "role='ceo': one of"),
    ]
    for call, said in refusals:
        with pytest.raises(ValueError, match=re.escape(said)):
            call()
    env.reset(seed=1)
    with pytest.raises(ValueError, match="agent 'ceo'"):
        env.observe("ceo")
    for _agent in env.agent_iter():
        _, _, terminated, truncated, _ = env.last()
        env.step(None if terminated or truncated else 0)
    with pytest.raises(ValueError, match="every agent's episode is over"):
        env.step(0)
    env.reset(seed=0, options={"options": 1})  # PettingZoo's api_test passes this one
