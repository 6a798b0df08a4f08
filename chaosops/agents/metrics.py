"""chaosops's own metrics of an episode, beside the runtime's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import actors
from chaosops.env.results import EpisodeResult


def count_episode(meter: actors.Meter, result: EpisodeResult, fields: Mapping[str, Any]) -> None:
    """chaosops's own metrics, beside the runtime's (with its labels first,
    e.g. ``policy``): episodes scored by scenario and whether they were
    resolved, and the mean cumulative reward (a gauge: rewards are negative as
    often as not, which a counter or a summary's sum cannot follow)."""
    scenario = result.scenario
    labels = (*meter.values(fields), scenario.failure_type.value, scenario.difficulty.value)
    names = (*meter.labels, "failure_type", "difficulty")
    meter.counter(
        "episodes_scored",
        "Episodes played to their end, by failure type, difficulty and resolved (true, false).",
        (*names, "resolved"),
    ).labels(*labels, "true" if result.resolved else "false").inc()
    meter.mean(
        "episode_reward_mean", "Mean cumulative reward of the episodes played to their end.", names
    ).observe(labels, result.cumulative_reward)
