"""The world's fast paths: the cached step reward equals computing it, episode ids,
step messages, and views that share what did not change."""

from __future__ import annotations

import uuid

import pytest

from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import AgentRole, ChaosOpsState, FailureType
from chaosops.env.rewards import (
    QUIET_CACHE_STEPS,
    compute_step_reward,
    step_reward,
)
from chaosops.env.world_sim import FLAG_NAMES, Scenario, _new_episode_id

from .helpers import make_world


@pytest.mark.parametrize("step", [0, 1, 5, QUIET_CACHE_STEPS - 1, QUIET_CACHE_STEPS, 10_000])
@pytest.mark.parametrize("true_flag", [None, *FLAG_NAMES])
def test_step_reward_matches_compute_step_reward(step: int, true_flag: str | None) -> None:
    state = ChaosOpsState(step_count=step, declared_root_cause_step=2)
    flags = dict.fromkeys(FLAG_NAMES, False)
    if true_flag is not None:
        flags[true_flag] = True
    for _ in range(2):  # a cache miss, then (maybe) a hit
        breakdown, total = step_reward(state, flags)
        expected = compute_step_reward(state=state, outcome_flags=flags)
        assert breakdown == expected and repr(breakdown) == repr(expected)
        assert repr(total) == repr(expected.total)


def test_new_episode_id_is_a_uuid4_string() -> None:
    ids = {_new_episode_id() for _ in range(1000)}
    assert len(ids) == 1000
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_reset_passes_the_episode_id_through() -> None:
    env = ChaosOpsEnvironment()
    env.reset(episode_id="given")
    assert env.state.episode_id == "given"
    env.reset()
    assert str(uuid.UUID(env.state.episode_id)) == env.state.episode_id
    world = make_world(FailureType.DB_DEADLOCK)
    assert world.reset(Scenario.from_type("cascade", seed=1), "x").episode_id == "x"


def test_step_messages_format_rewards_like_the_format_spec() -> None:
    env = ChaosOpsEnvironment()
    for max_steps in (3, 40):
        obs = env.reset(scenario=Scenario.from_type("memory_leak", seed=0, max_steps=max_steps))
        while not obs.done:
            obs = env.step({"action_type": "noop"})
            assert obs.message.endswith(f"; reward {obs.reward:+.1f}")


def test_views_keep_the_parts_that_did_not_change() -> None:
    """A view is validated, and validation keeps the log lines, alerts and metric
    snapshots it is given: consecutive views share them instead of copying."""
    env = ChaosOpsEnvironment()
    for ft in FailureType:
        obs = env.reset(scenario=Scenario.from_type(ft, seed=2, difficulty="hard"))
        first = env.world.project_view(AgentRole.SRE)
        again = env.world.project_view(AgentRole.SRE)
        assert first is not again and first == again
        for name, metrics in first.visible_metrics.items():
            assert again.visible_metrics[name] is metrics
        assert all(a is b for a, b in zip(first.visible_logs, again.visible_logs, strict=True))
        assert all(a is b for a, b in zip(first.visible_alerts, again.visible_alerts, strict=True))
        before = first.model_copy(deep=True)
        for _ in range(8):  # the world acts and ticks: later views change, not this one
            if not obs.done:
                obs = env.step({"action_type": "restart", "target": "db"})
        assert first == before
