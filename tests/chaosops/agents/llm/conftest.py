"""Fixtures for the LLM policy's tests: a fake turn, a first observation."""

from __future__ import annotations

import pytest

from chaosops.env.models import ChaosOpsObservation

from .helpers import FakeTurn, first_observation


@pytest.fixture
def fake_turn(monkeypatch: pytest.MonkeyPatch) -> FakeTurn:
    turn = FakeTurn()
    monkeypatch.setattr("chaosops.agents.llm.policy._current_turn", lambda: turn)
    return turn


@pytest.fixture
def observation() -> ChaosOpsObservation:
    return first_observation()
