"""Tier pools, seeds, promotion and the scenario stream (docs/world.md, "Curriculum")."""

from __future__ import annotations

import itertools

import pytest

from chaosops.curriculum.generator import (
    TIER_MAX_STEPS,
    Curriculum,
    scenarios_for_tier,
    stream_scenarios,
)
from chaosops.env.models import DifficultyTier, FailureType
from chaosops.env.world_sim import Scenario

EASY, MEDIUM, HARD = DifficultyTier.EASY, DifficultyTier.MEDIUM, DifficultyTier.HARD
F = FailureType


def test_tier_max_steps() -> None:
    assert TIER_MAX_STEPS == {EASY: 12, MEDIUM: 18, HARD: 25}


@pytest.mark.parametrize(
    ("tier", "pool"),
    [
        (EASY, [F.DB_DEADLOCK, F.MEMORY_LEAK, F.BAD_CONFIG_PUSH, F.DNS_OUTAGE]),
        (MEDIUM, [F.CASCADE, F.AUTOSCALER_COST_CUT, F.DISK_FULL]),
        (HARD, [F.MISROUTED_TRAFFIC, F.CASCADE, F.AUTOSCALER_COST_CUT, F.ROGUE_DEPLOY_BOT]),
    ],
)
def test_scenarios_for_tier(tier: DifficultyTier, pool: list[FailureType]) -> None:
    got = scenarios_for_tier(tier, seed_offset=1000, episodes_per_type=2)
    expected = [
        Scenario.from_type(
            ft, seed=1000 + 97 * i + 31 * r, difficulty=tier, max_steps=TIER_MAX_STEPS[tier]
        )
        for i, ft in enumerate(pool)
        for r in range(2)
    ]
    assert got == expected
    assert len(scenarios_for_tier(tier)) == 3 * len(pool)
    assert all(s.inject_misleading_logs == (tier is HARD) for s in got)


def test_hard_seeds_explicit() -> None:
    seeds = [s.seed for s in scenarios_for_tier("hard", episodes_per_type=3)]
    assert seeds == [0, 31, 62, 97, 128, 159, 194, 225, 256, 291, 322, 353]


def test_curriculum_defaults() -> None:
    c = Curriculum()
    assert c.tier is EASY and c.promotions == [EASY]
    assert (c.window, c.easy_threshold, c.medium_threshold) == (10, 70.0, 55.0)


def test_promotion_needs_a_full_window() -> None:
    c = Curriculum(window=3)
    assert c.update(500.0) is EASY
    assert c.update(500.0) is EASY
    assert c.update(-289.0) is MEDIUM  # mean 237 >= 70 on a full window
    assert c.promotions == [EASY, MEDIUM]
    assert c.recent_rewards == []  # cleared on promotion


def test_promotion_uses_the_rolling_window() -> None:
    c = Curriculum(window=2, easy_threshold=10.0, medium_threshold=20.0)
    assert c.update(0.0) is EASY
    assert c.update(19.0) is EASY  # mean 9.5
    assert c.update(1.0) is MEDIUM  # window (19, 1): mean 10
    assert c.update(20.0) is MEDIUM
    assert c.update(19.9) is MEDIUM  # mean 19.95 < 20
    assert c.update(20.1) is HARD  # window (19.9, 20.1): mean 20
    for _ in range(5):
        assert c.update(1e6) is HARD
    assert c.promotions == [EASY, MEDIUM, HARD]


def test_curriculum_starting_tier_and_sampling() -> None:
    c = Curriculum(tier="medium")
    assert c.promotions == [MEDIUM]
    assert c.sample_scenarios() == scenarios_for_tier(MEDIUM, episodes_per_type=1)
    assert c.sample_scenarios(seed_offset=5, episodes_per_type=2) == scenarios_for_tier(
        MEDIUM, seed_offset=5, episodes_per_type=2
    )


def test_stream_cycles_and_restarts_on_promotion() -> None:
    c = Curriculum(window=1, easy_threshold=0.0, medium_threshold=1e9)
    stream = stream_scenarios(c, seed_base=7)
    easy = scenarios_for_tier(EASY, seed_offset=7, episodes_per_type=1)
    first = list(itertools.islice(stream, 6))
    assert first == easy + easy[:2]
    c.update(1.0)  # -> medium
    medium = scenarios_for_tier(MEDIUM, seed_offset=1007, episodes_per_type=1)
    assert list(itertools.islice(stream, 4)) == medium + medium[:1]
    c.update(1e10)  # -> hard
    hard = scenarios_for_tier(HARD, seed_offset=2007, episodes_per_type=1)
    assert list(itertools.islice(stream, 5)) == hard + hard[:1]


def test_an_unknown_tier_lists_the_tiers() -> None:
    with pytest.raises(
        ValueError, match=r"^unknown difficulty tier 'extreme'; tiers are easy, medium, hard$"
    ):
        scenarios_for_tier("extreme")


def test_stream_ignores_a_tier_reassigned_to_the_same_value() -> None:
    c = Curriculum()
    it = stream_scenarios(c, seed_base=0)
    assert next(it).seed == 0
    c.tier = "easy"  # the same tier, given as its string value: not a change
    assert next(it).seed == 97


def test_curriculum_with_string_tier_still_promotes() -> None:
    c = Curriculum(window=1)
    c.tier = "medium"
    assert c.update(60) == DifficultyTier.HARD
