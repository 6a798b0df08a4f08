"""actors.testing.check_env: a tiny game of our own and ChaosOps pass it; each
breach of the contract is named."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from actors.testing import EnvCheckError, check_env


@dataclass(frozen=True)
class Count:
    turn_role: str
    done: bool
    reward: float | None
    total: int


class CountTo21:
    """Two players add 1 to 3 in turn; whoever reaches 21 wins."""

    turn_order = ("odd", "even")

    def __init__(self) -> None:
        self.total = 0
        self.turn = 0

    def reset(self, start: int = 0) -> Count:
        self.total, self.turn = start, 0
        return Count("odd", False, None, start)

    def step(self, action: int) -> Count:
        self.total += max(1, min(3, int(action)))
        self.turn += 1
        done = self.total >= 21
        return Count(self.turn_order[self.turn % 2], done, 1.0 if done else 0.0, self.total)


def take_two(observation: Count, role: str) -> int:
    return 2


def test_a_tiny_game_of_our_own_passes() -> None:
    assert check_env(CountTo21, policy=take_two) == 11
    assert check_env(CountTo21(), policy=take_two, reset_kwargs={"start": 10}) == 6


def test_chaosops_passes() -> None:
    from chaosops.agents.policies import heuristic_policy
    from chaosops.curriculum.generator import scenarios_for_tier
    from chaosops.env.environment import ChaosOpsEnvironment

    scenario = scenarios_for_tier("medium")[0]
    turns = check_env(
        ChaosOpsEnvironment,
        policy=lambda obs, role: heuristic_policy(scenario.seed)(obs, role),
        reset_kwargs={"scenario": scenario, "episode_id": "check"},
    )
    assert turns > 0


@dataclass
class Live:
    turn_role: str
    done: bool
    reward: float | None
    seen: list[int] = field(default_factory=list)


class Mutating(CountTo21):
    """Returns one live object, changed in place at every step."""

    def reset(self, start: int = 0) -> Any:
        self.live = Live("odd", False, None)
        return self.live

    def step(self, action: int) -> Any:
        self.live.seen.append(action)
        self.live.done = len(self.live.seen) >= 4
        return self.live


class Noisy(CountTo21):
    def step(self, action: int) -> Count:
        return super().step(random.choice([1, 2, 3]))


class Endless(CountTo21):
    def step(self, action: int) -> Count:
        return Count("odd", False, 0.0, 0)


class Stranger(CountTo21):
    def step(self, action: int) -> Count:
        return Count("nobody", False, 0.0, 0)


class NoReward(CountTo21):
    def reset(self, start: int = 0) -> Any:
        return type("Obs", (), {"turn_role": "odd", "done": False})()


class BadOrder(CountTo21):
    turn_order = ("odd", "odd")  # type: ignore[assignment]


class TextReward(CountTo21):
    def step(self, action: int) -> Any:
        return Count("even", True, "high", 0)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (Mutating, "the observation of turn 0 changed after it was returned"),
        (Noisy, "a second play with the same reset arguments differs at turn"),
        (Endless, "not done after 50 steps"),
        (Stranger, "turn_role 'nobody' from step 0 is not in turn_order"),
        (NoReward, "the observation reset returned has no 'reward'"),
        (BadOrder, "turn_order names a role twice"),
        (TextReward, "reward from step 0 must be a number or None, got 'high'"),
    ],
)
def test_each_breach_is_named(env: Any, message: str) -> None:
    random.seed(1)
    with pytest.raises(EnvCheckError, match=message):
        check_env(env, policy=take_two, max_turns=50)


def test_a_policy_that_fails_under_the_runtime_is_named() -> None:
    calls = []

    def flaky(observation: Count, role: str) -> int:
        calls.append(role)
        if len(calls) > 30:  # the runtime's play, after two clean synchronous ones
            raise ValueError("flaky")
        return 2

    with pytest.raises(EnvCheckError, match="needed a fallback action"):
        check_env(CountTo21, policy=flaky)
