"""Training on ChaosOps: rows for TRL, and environments a trainer drives.

* :func:`dataset` gives one row per scenario: the prompt of the trained role
  and the columns :meth:`chaosops.train.trl.ChaosOpsToolEnv.reset` reads.
* :class:`chaosops.train.trl.ChaosOpsToolEnv` is TRL's ``environment_factory``.
* :func:`chaosops.env.pettingzoo.aec_env` is the PettingZoo AEC environment.

See docs/training.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from chaosops.agents.llm.render import system_prompt
from chaosops.env.models import AgentRole
from chaosops.scenarios import canonical_suite_paths, load_scenarios

__all__ = ["dataset", "rows", "tool_system_prompt"]

_ANSWER_FORMAT = "## Answer format"


def tool_system_prompt(role: AgentRole | str) -> str:
    """A role's system prompt for a model that moves by calling tools: the
    role's prompt, its JSON answer format replaced by the tools."""
    text = system_prompt(role)
    text = text.split(_ANSWER_FORMAT, 1)[0].rstrip()
    return f"{text}\n\n## How to move\nEach turn, make exactly one move by calling one tool."


def rows(suites: Iterable[str | Path] | None = None, role: str = "sre") -> list[dict[str, Any]]:
    """One row per scenario of ``suites`` (default: the canonical suites), ``role`` trained."""
    role = AgentRole(role).value
    prompt = [
        {"role": "system", "content": tool_system_prompt(role)},
        {"role": "user", "content": f"You are the {role}. The incident:\n"},
    ]
    return [
        {
            "prompt": prompt,
            "failure_type": str(scenario.failure_type),
            "difficulty": str(scenario.difficulty),
            "seed": scenario.seed,
            "max_steps": scenario.max_steps,
            "role": role,
        }
        for path in (canonical_suite_paths() if suites is None else suites)
        for scenario in load_scenarios(path)
    ]


def dataset(suites: Iterable[str | Path] | None = None, role: str = "sre") -> Any:
    """:func:`rows` as a ``datasets.Dataset`` (needs the ``train`` extra)."""
    import datasets  # the train extra's; the rest of chaosops runs without it

    return datasets.Dataset.from_list(rows(suites, role))
