"""Curriculum of ChaosOps scenarios (docs/world.md, "Curriculum and the canonical suites").

Three tiers of failure pools with their step budgets; `scenarios_for_tier`
builds a tier's deterministic scenario list, `Curriculum` promotes from easy to
hard on a rolling mean of episode rewards, and `stream_scenarios` yields
scenarios forever following the curriculum's tier.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from types import MappingProxyType

from chaosops.env.failures import tier_pool
from chaosops.env.models import DifficultyTier, FailureType
from chaosops.env.world_sim import Scenario

__all__ = [
    "TIER_MAX_STEPS",
    "TIER_POOLS",
    "Curriculum",
    "scenarios_for_tier",
    "stream_scenarios",
]

TIER_POOLS: Mapping[DifficultyTier, tuple[FailureType, ...]] = MappingProxyType(
    {tier: tier_pool(tier) for tier in DifficultyTier}
)
"""Each tier's failure types, as the failure table places them."""

TIER_MAX_STEPS: Mapping[DifficultyTier, int] = MappingProxyType(
    {
        DifficultyTier.EASY: 12,
        DifficultyTier.MEDIUM: 18,
        DifficultyTier.HARD: 25,
    }
)

SEED_STRIDE_TYPE = 97
SEED_STRIDE_REPEAT = 31
STREAM_TIER_OFFSET = 1000


def _tier(tier: DifficultyTier | str) -> DifficultyTier:
    try:
        return DifficultyTier(tier)
    except ValueError:
        accepted = ", ".join(t.value for t in DifficultyTier)
        raise ValueError(f"unknown difficulty tier {tier!r}; tiers are {accepted}") from None


def scenarios_for_tier(
    tier: DifficultyTier | str, *, seed_offset: int = 0, episodes_per_type: int = 3
) -> list[Scenario]:
    """The tier's scenarios: pool order outer, repetitions inner.

    Failure at pool position i, repetition r gets seed
    ``seed_offset + 97*i + 31*r`` and the tier's max steps.
    """
    tier = _tier(tier)
    max_steps = TIER_MAX_STEPS[tier]
    return [
        Scenario.from_type(
            ft,
            seed=seed_offset + SEED_STRIDE_TYPE * i + SEED_STRIDE_REPEAT * r,
            difficulty=tier,
            max_steps=max_steps,
        )
        for i, ft in enumerate(TIER_POOLS[tier])
        for r in range(episodes_per_type)
    ]


_NEXT_TIER = MappingProxyType(
    {
        DifficultyTier.EASY: DifficultyTier.MEDIUM,
        DifficultyTier.MEDIUM: DifficultyTier.HARD,
    }
)


class Curriculum:
    """Promotes easy -> medium -> hard on the rolling mean of episode rewards.

    A promotion needs a full window whose mean reaches the current tier's
    threshold; it clears the window. Hard stays hard. `promotions` lists the
    tiers the curriculum has been in, starting with the first.
    """

    def __init__(
        self,
        tier: DifficultyTier | str = DifficultyTier.EASY,
        window: int = 10,
        easy_threshold: float = 70.0,
        medium_threshold: float = 55.0,
    ) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.tier = _tier(tier)
        self.window = window
        self.easy_threshold = easy_threshold
        self.medium_threshold = medium_threshold
        self.promotions: list[DifficultyTier] = [self.tier]
        self._rewards: deque[float] = deque(maxlen=window)

    @property
    def recent_rewards(self) -> list[float]:
        """The rewards in the current window, oldest first."""
        return list(self._rewards)

    def _threshold(self) -> float | None:
        # Compared by value: `tier` is a public attribute a caller may set to a string.
        if self.tier == DifficultyTier.EASY:
            return self.easy_threshold
        if self.tier == DifficultyTier.MEDIUM:
            return self.medium_threshold
        return None

    def update(self, reward: float) -> DifficultyTier:
        """Record one episode's reward; return the (possibly promoted) tier."""
        self._rewards.append(float(reward))
        threshold = self._threshold()
        if threshold is not None and len(self._rewards) == self.window:
            if sum(self._rewards) / self.window >= threshold:
                self.tier = _NEXT_TIER[self.tier]
                self.promotions.append(self.tier)
                self._rewards.clear()
        return self.tier

    def sample_scenarios(
        self, *, seed_offset: int = 0, episodes_per_type: int = 1
    ) -> list[Scenario]:
        """`scenarios_for_tier` of the current tier."""
        return scenarios_for_tier(
            self.tier, seed_offset=seed_offset, episodes_per_type=episodes_per_type
        )


def stream_scenarios(curriculum: Curriculum, *, seed_base: int = 0) -> Iterator[Scenario]:
    """Yield scenarios forever, following the curriculum's tier.

    Cycles through ``curriculum.sample_scenarios(seed_offset=offset)`` (offset
    starts at `seed_base`); whenever the tier has changed since the last draw,
    adds 1000 to the offset and starts over on the new tier's list. When one
    list is exhausted without a tier change, the same list is cycled again.
    """
    offset = seed_base
    tier = curriculum.tier
    batch = curriculum.sample_scenarios(seed_offset=offset)
    index = 0
    while True:
        if curriculum.tier != tier:  # a change of value, not of object
            tier = curriculum.tier
            offset += STREAM_TIER_OFFSET
            batch = curriculum.sample_scenarios(seed_offset=offset)
            index = 0
        if index >= len(batch):
            index = 0
        yield batch[index]
        index += 1
