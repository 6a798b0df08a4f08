"""OpenEnv 0.10's Task API for ``chaosops serve``: the splits are the canonical
suites (``easy``, ``medium``, ``hard``, and ``canonical``, all three), a task
is a scenario, and ``reset(split=..., index=...)`` plays it. What the
server's ``/chaosops/splits``, ``/num_tasks``, ``/task`` and ``/task_range``
routes answer (OpenEnv's own routes, reading these methods)."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException

from chaosops.env.world_sim import Scenario
from chaosops.outputs import scenario_fields
from chaosops.scenarios import canonical_suite_paths, load_scenarios

ALL = "canonical"


def split_names() -> list[str]:
    return [path.stem for path in canonical_suite_paths()] + [ALL]


def split_scenarios(split: str) -> list[Scenario]:
    """The scenarios of ``split``, in their suites' order; an unknown split is a 404."""
    paths = canonical_suite_paths()
    if split == ALL:
        return [s for path in paths for s in load_scenarios(path)]
    for path in paths:
        if path.stem == split:
            return load_scenarios(path)
    raise HTTPException(404, f"no split {split!r}; the splits are {', '.join(split_names())}")


def task_of(scenario: Scenario, split: str, index: int) -> dict[str, Any]:
    """A task as the Task API lists it: its id (the scenario's handle), where it
    sits, and the fields a reset takes."""
    fields = scenario_fields(scenario)
    handle = f"{fields['failure_type']}/{fields['difficulty']}/seed={fields['seed']}"
    return {"id": handle, "split": split, "index": index, **fields}


class TaskSplits:
    """The Task API's methods, mixed into the served environment (OpenEnv finds
    them by name; they are side-effect free, as its protocol asks)."""

    def list_splits(self) -> list[dict[str, str]]:
        return [{"name": name, "type": "test"} for name in split_names()]

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return [task_of(s, split, i) for i, s in enumerate(split_scenarios(split))]

    def num_tasks(self, split: str) -> int:
        return len(split_scenarios(split))

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        scenarios = split_scenarios(split)
        if not 0 <= index < len(scenarios):
            raise IndexError(index)  # OpenEnv answers 400, "Invalid task index"
        return task_of(scenarios[index], split, index)

    def get_task_range(
        self, split: str, start: int | None = None, stop: int | None = None
    ) -> list[dict[str, Any]]:
        scenarios = split_scenarios(split)
        positions = range(len(scenarios))[start:stop]
        return [task_of(scenarios[i], split, i) for i in positions]


def scenario_of_task(split: Any, index: Any) -> Scenario:
    """The scenario ``reset(split=, index=)`` names; ValueError saying what is accepted."""
    if not isinstance(split, str) or split not in split_names():
        raise ValueError(f"split {split!r:.40}: one of {', '.join(split_names())}")
    scenarios = split_scenarios(split)
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(scenarios):
        raise ValueError(f"index {index!r:.20}: 0 to {len(scenarios) - 1} in split {split!r}")
    return scenarios[index]
