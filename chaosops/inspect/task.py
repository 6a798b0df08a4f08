"""The inspect_ai task ``chaosops/incident``: one sample per scenario.

    inspect eval chaosops/incident --model openai-api/local/chaosops-mock \\
        -T tier=easy -T models=sre,dev -T turn_timeout=30

The samples are the episodes ``chaosops run`` plans for the same selection
(the canonical suites, ``tier``, ``failure_type``, ``seed_offset``), in the
same order; a sample's id is the scenario's handle, ``failure/tier/seed=N``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample

from chaosops import incidents
from chaosops.agents.policies import SCRIPTED
from chaosops.env.environment import DEFAULT_TURN_ORDER
from chaosops.incidents import handles_of, names_of
from chaosops.outputs import scenario_fields

from .scorer import incident_figures, resolved
from .solver import play_incident

__all__ = ["incident", "scenarios_of"]


def _names(argument: str, given: str | Sequence[str] | None, accepted: Sequence[str]) -> list[str]:
    return names_of(f"-T {argument}", given, accepted)


def scenarios_of(
    tier: str | Sequence[str] | None = None,
    failure_type: str | Sequence[str] | None = None,
    seed_offset: int = 0,
) -> list[Any]:
    """The scenarios ``chaosops run`` plays for this selection, in its order."""
    return incidents.scenarios_of(tier, failure_type, seed_offset,
                                  arguments=("-T tier", "-T failure_type"))  # fmt: skip


def _sample(scenario: Any, handle: str) -> Sample:
    fields = scenario_fields(scenario)
    return Sample(
        input=f"ChaosOps incident {handle}",
        target=fields["failure_type"],
        id=handle,
        metadata={"scenario": fields},
    )


@task
def incident(
    tier: str | Sequence[str] | None = None,
    failure_type: str | Sequence[str] | None = None,
    models: str | Sequence[str] = "sre",
    others: str = "heuristic",
    turn_timeout: float | None = None,
    seed_offset: int = 0,
    max_tokens: int | None = None,
) -> Task:
    """ChaosOps incidents, played by inspect's models in the ``models`` seats.

    Args:
        tier: easy, medium or hard (several joined by commas; default: all).
        failure_type: the failure types to keep (default: all).
        models: the roles the models play: sre, oversight, dev, manager, or ``all``.
            ``--model-role ROLE=MODEL`` gives a role its own model.
        others: the scripted policy of the other roles: random, heuristic or oracle.
        turn_timeout: each model turn's deadline in seconds; a late turn plays a noop.
        seed_offset: added to every scenario's seed (as ``chaosops run --seed-offset``).
        max_tokens: the longest answer a model turn may give.
    """
    roles = [r.value for r in DEFAULT_TURN_ORDER]
    seats = roles if models == "all" else _names("models", models, roles)
    _names("others", others, SCRIPTED)
    if turn_timeout is not None and not float(turn_timeout) > 0:
        raise ValueError(f"-T turn_timeout={turn_timeout!r}: expected a number of seconds above 0")
    scenarios = scenarios_of(tier, failure_type, seed_offset)
    dataset = [_sample(s, h) for s, h in zip(scenarios, handles_of(scenarios), strict=True)]
    return Task(
        dataset=MemoryDataset(dataset, name="chaosops"),
        solver=play_incident(seats, others, turn_timeout, max_tokens),
        scorer=[resolved(), incident_figures()],
    )
