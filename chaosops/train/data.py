"""The rows a trainer reads: one per scenario in which the trained role moves."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from chaosops._extras import require
from chaosops.agents.conversation import opening_prompt, tool_system_prompt
from chaosops.agents.llm.answers import describe
from chaosops.agents.policies import Others
from chaosops.agents.seated import SeatedEpisode
from chaosops.curriculum.generator import (
    SEED_STRIDE_REPEAT,
    SEED_STRIDE_TYPE,
    TIER_MAX_STEPS,
    TIER_POOLS,
)
from chaosops.env.models import AgentRole, DifficultyTier, FailureType
from chaosops.env.world_sim import Scenario
from chaosops.scenarios import canonical_suite_paths, load_scenarios

__all__ = ["dataset", "held_out_scenarios", "row_of", "rows", "tool_system_prompt",
           "training_scenarios"]  # fmt: skip

TRAINING_SEED_OFFSET = 10_000
"""Added to the training scenarios' seeds: none is a canonical seed."""


def row_of(scenario: Scenario, role: AgentRole | str) -> dict[str, Any]:
    """The row of one scenario: its prompt, and the columns ``reset`` reads."""
    role = AgentRole(role).value
    return {
        "prompt": opening_prompt(role),
        "failure_type": str(scenario.failure_type),
        "difficulty": str(scenario.difficulty),
        "seed": scenario.seed,
        "max_steps": scenario.max_steps,
        "role": role,
    }


def rows(
    suites: Iterable[str | Path] | None = None,
    role: str = "sre",
    others: Others | None = "heuristic",
    seed_offset: int = 0,
    *,
    scenarios: Iterable[Scenario] | None = None,
) -> list[dict[str, Any]]:
    """One row per scenario of ``suites`` (default: the canonical suites), or
    of ``scenarios`` (:func:`training_scenarios`, say), in which ``role``,
    trained, gets a move.

    ``others`` are the policies that will play the other roles, as
    :class:`~chaosops.train.trl.ChaosOpsToolEnv` takes them (its default,
    heuristic, here too): each scenario's opening is played with them, and a
    scenario they close before the role's first turn is left out (its rollout
    would score the others alone, the same for every completion). Scripted
    policies are seeded per scenario, so the environment replays exactly that
    opening. ``others=None`` keeps every scenario.

    Rows of ``scenarios`` whose opening (the role's first prompt, its view
    included) is a canonical row's are left out: a dev is shown the same
    first view of a cascade as of a deadlock, whose fix is the same.

    ``seed_offset`` shifts every seed: rows to train on that share no scenario
    with the suites, which stay held out for evaluation. An offset that makes
    a row one of the suites' scenarios is refused. A shifted row whose opening
    (the role's first prompt, its view included) is a suite row's is left out
    too: the easy and medium tiers' openings do not change with the seed, so
    they would be held-out rows under another name (only the hard tier's
    distractor lines follow the seed). Train on other scenarios of those tiers.
    """
    role = AgentRole(role).value
    if scenarios is not None:
        if suites is not None or seed_offset:
            raise ValueError("scenarios= is instead of suites= and seed_offset=")
        return _rows_of(_unlike_held_out(list(scenarios), AgentRole(role), others), role, others)
    given = [
        scenario
        for path in (canonical_suite_paths() if suites is None else suites)
        for scenario in load_scenarios(path)
    ]
    scenarios = [dataclasses.replace(sc, seed=sc.seed + seed_offset) for sc in given]
    if seed_offset and (shared := set(scenarios) & set(given)):
        first = min(shared, key=lambda sc: (str(sc.failure_type), sc.seed))
        raise ValueError(
            f"seed_offset={seed_offset} makes rows that are scenarios of the suites "
            f"({len(shared)}, e.g. {first.failure_type} seed {first.seed}); "
            "choose an offset larger than the suites' largest seed"
        )
    if seed_offset:
        scenarios = _unlike_held_out(scenarios, AgentRole(role), others, given)
    return _rows_of(scenarios, role, others)


def _unlike_held_out(
    scenarios: list[Scenario],
    role: AgentRole,
    others: Others | None,
    held_out: list[Scenario] | None = None,
) -> list[Scenario]:
    """``scenarios`` less those whose opening for ``role`` a held-out row has."""
    held = {_opening(sc, role, others) for sc in held_out or held_out_scenarios()}
    return [sc for sc in scenarios if _opening(sc, role, others) not in held]


def _rows_of(scenarios: list[Scenario], role: str, others: Others | None) -> list[dict[str, Any]]:
    if others is not None:
        scenarios = [sc for sc in scenarios if _role_moves(sc, AgentRole(role), others)]
    return [row_of(scenario, role) for scenario in scenarios]


def held_out_scenarios() -> list[Scenario]:
    """The canonical suites' 55 scenarios, in order: the rows an evaluation holds out."""
    return [scenario for path in canonical_suite_paths() for scenario in load_scenarios(path)]


def training_scenarios(episodes_per_type: int = 3) -> list[Scenario]:
    """Scenarios to train on, none of which opens as a held-out one does:
    on each tier, the failure types its canonical suite leaves out (memory
    leaks with the medium tier's 18 steps, say), at seeds of their own.

    Held-out rows so differ from training rows by scenario, not by seed: the
    easy and medium openings do not change with the seed, and the hard
    tier's distractor lines do not show in every role's view. Every failure
    type is among them, so every fix is seen in training, on another tier.
    """
    return [
        Scenario.from_type(
            failure,
            seed=TRAINING_SEED_OFFSET + SEED_STRIDE_TYPE * i + SEED_STRIDE_REPEAT * r,
            difficulty=tier,
            max_steps=TIER_MAX_STEPS[tier],
        )
        for tier in DifficultyTier
        for i, failure in enumerate(FailureType)
        if failure not in TIER_POOLS[tier]
        for r in range(episodes_per_type)
    ]


def _opening(scenario: Scenario, role: AgentRole, others: Others | None) -> str:
    """What ``role`` is first shown of ``scenario``: its prompt is the same for every row."""
    play = SeatedEpisode(others if others is not None else "heuristic", frozenset({role}))
    try:
        return describe(play.start(scenario).observation, role)
    finally:
        play.close()


def _role_moves(scenario: Scenario, role: AgentRole, others: Others) -> bool:
    """Whether ``role`` gets a turn of ``scenario`` when ``others`` play the rest."""
    play = SeatedEpisode(others, frozenset({role}))
    try:
        return not play.start(scenario).done
    finally:
        play.close()


def dataset(
    suites: Iterable[str | Path] | None = None,
    role: str = "sre",
    others: Others | None = "heuristic",
    seed_offset: int = 0,
) -> Any:
    """:func:`rows` as a ``datasets.Dataset`` (needs ``datasets`` only, not torch)."""
    datasets = require("datasets", "train", "chaosops.train.dataset")  # rows() runs without it
    return datasets.Dataset.from_list(rows(suites, role, others, seed_offset))
