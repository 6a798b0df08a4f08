"""What every harness adapter (inspect_ai, verifiers) takes from chaosops: the
scenarios ``chaosops run`` plans for a selection, each one's handle, and the
figures of an episode's results line.

A harness names its own arguments; ``argument`` in a refusal is the name its
user typed (``-T tier``, ``--env.taskset.tier``), so the line points there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chaosops.env.models import DifficultyTier, FailureType
from chaosops.outputs import ResultLine, scenario_fields
from chaosops.role_figures import ROLE_ORDER, role_figures
from chaosops.runs.plan import plan_episodes
from chaosops.runs.spec import RunSpec

__all__ = ["figures_of", "handles_of", "names_of", "scenarios_of"]


def names_of(
    argument: str, given: str | Sequence[str] | None, accepted: Sequence[str]
) -> list[str]:
    """``given`` (one name, names joined by commas, or a list) checked against ``accepted``."""
    if given is None:
        return []
    names = [n.strip() for n in given.split(",")] if isinstance(given, str) else list(given)
    for name in names:
        if name not in accepted:
            raise ValueError(f"{argument}={name!r}: expected one of {', '.join(accepted)}")
    return names


def scenarios_of(
    tier: str | Sequence[str] | None = None,
    failure_type: str | Sequence[str] | None = None,
    seed_offset: int = 0,
    *,
    arguments: tuple[str, str] = ("tier", "failure_type"),
) -> list[Any]:
    """The scenarios ``chaosops run`` plays for this selection, in its order;
    ``arguments`` are the names a refusal gives the two selections."""
    spec = RunSpec(
        policies=("heuristic",),
        tiers=tuple(names_of(arguments[0], tier, [t.value for t in DifficultyTier])),
        failure_types=tuple(names_of(arguments[1], failure_type, [f.value for f in FailureType])),
        seed_offset=int(seed_offset),
    )
    return [planned.scenario for planned in plan_episodes(spec)]


def handles_of(scenarios: Sequence[Any]) -> list[str]:
    """Each scenario's handle, ``failure/tier/seed=N``: unique within the list
    (two suite entries that differ by their step limit only get it appended)."""
    handles: list[str] = []
    seen: set[str] = set()
    for scenario in scenarios:
        fields = scenario_fields(scenario)
        handle = f"{fields['failure_type']}/{fields['difficulty']}/seed={fields['seed']}"
        if handle in seen:
            handle += f"/max_steps={fields['max_steps']}"
        seen.add(handle)
        handles.append(handle)
    return handles


def figures_of(record: ResultLine) -> dict[str, float]:
    """A results line's figures: return, MTTR, wrong fixes, legal shares (-1 where none)."""
    shares = {f.role: f.legal_share for f in role_figures([record])}
    return {
        "return": float(record["cumulative_reward"]),
        "mttr": float(record["mttr_steps"]),
        "wrong_fixes": float(record["wrong_fixes"]),
        **{f"legal_{role}": _or_none(shares.get(role)) for role in ROLE_ORDER},
    }


def _or_none(share: float | None) -> float:
    return -1.0 if share is None else float(share)
