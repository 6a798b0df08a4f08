"""Runs from Python written to a run folder, by the engine ``chaosops run`` uses.

``run_to_folder(out, scenarios, policies, name="heuristic")`` plays the
scenarios into ``out`` and writes, as each episode finishes,
``results.jsonl`` and ``trajectories.jsonl``, then ``summary.json``;
``run.json`` lists the scenarios before the first episode, and ``log.jsonl``
holds the run's events. ``chaosops view``, ``watch``, ``transcript`` and
``replay`` read the folder; ``resume=True`` (or ``chaosops run --resume --out
DIR``, when ``name`` is a policy the command knows) plays only what is missing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import actors
from chaosops.agents.runner import Policies
from chaosops.env.world_sim import Scenario
from chaosops.outputs import LOG_FILE, scenario_fields
from chaosops.summary import Summary

from .config import RunConfig
from .engine import aplay_all, open_folders, open_play
from .errors import Named, RunError
from .plan import plan_episodes
from .session import Session
from .spec import Deadlines, RunSpec

__all__ = ["arun_to_folder", "run_to_folder"]

TurnTimeout = float | Mapping[Any, float] | None
"""Seconds for every role's turn, seconds by role, or no deadline."""


def run_to_folder(
    out: str | Path,
    scenarios: Iterable[Scenario],
    policies: Policies,
    *,
    name: str = "python",
    concurrency: int = 64,
    turn_timeout: TurnTimeout = None,
    resume: bool = False,
    log: bool = True,
    samples: int = 1,
) -> Summary:
    """Synchronous :func:`arun_to_folder`."""
    run = functools.partial(
        arun_to_folder, out, scenarios, policies, name=name, concurrency=concurrency,
        turn_timeout=turn_timeout, resume=resume, log=log, samples=samples,
    )  # fmt: skip
    return actors.run(run)


async def arun_to_folder(
    out: str | Path,
    scenarios: Iterable[Scenario],
    policies: Policies,
    *,
    name: str = "python",
    concurrency: int = 64,
    turn_timeout: TurnTimeout = None,
    resume: bool = False,
    log: bool = True,
    samples: int = 1,
) -> Summary:
    """Play ``scenarios`` with ``policies`` (a role map or a factory, as
    :func:`~chaosops.agents.runner.arun_batch` takes) into the run folder
    ``out``; returns its summary. ``name`` is what the outputs call the policy.

    Without ``resume`` a folder that already holds a run is refused
    (:class:`~chaosops.runs.RunError`); with it, the episodes done are kept
    and the others played. ``log`` points ``actors``' structured log at the
    folder's ``log.jsonl`` for the run (where ``watch`` and ``view`` see the
    episodes in flight), as ``chaosops run`` does; it replaces a logging set
    up before. Signals are left to the caller: Ctrl-C raises as it would.
    ``samples`` plays each scenario that many times (pass@k, as ``--samples``).
    A keyword out of bounds is one ValueError naming it, before anything is written.
    """
    _check_keywords(turn_timeout, concurrency, samples)
    spec = RunSpec(
        policies=(name,), concurrency=concurrency, samples=samples,
        scenarios=tuple(scenario_fields(s) for s in scenarios),
        deadlines=_deadlines(turn_timeout),
    )  # fmt: skip
    config = RunConfig(command="run", spec=spec, out=Path(out), resume=resume, progress=False)
    try:
        play = open_play(config, plan_episodes(spec))
        open_folders([play])
    except RunError as exc:
        raise RunError(*map(_in_keywords, exc.message.parts), code=exc.code) from None
    play.factory = _factory(policies)
    if log:
        actors.configure_logging(config.out / LOG_FILE)
    await aplay_all([play], config, Session())
    return play.played


# this function's keywords where they are not the setting's own name
_KEYWORDS = MappingProxyType({"policy": "name", "role_timeout": "turn_timeout"})


def _in_keywords(part: str | Named) -> str | Named:
    """A setting the engine names, as this function's keyword."""
    if isinstance(part, str):
        return part
    return Named(_KEYWORDS.get(part.field, part.field), part.value)


def _check_keywords(turn_timeout: TurnTimeout, concurrency: int, samples: int) -> None:
    given = turn_timeout.values() if isinstance(turn_timeout, Mapping) else [turn_timeout]
    for seconds in given:
        if seconds is not None and (
            isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0
        ):
            raise ValueError(
                f"turn_timeout={turn_timeout!r:.60}: seconds above 0, a map of them by role, "
                "or None for no deadline"
            )
    for keyword, value in (("concurrency", concurrency), ("samples", samples)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{keyword}={value!r:.40}: a whole number from 1")


def _deadlines(turn_timeout: TurnTimeout) -> Deadlines:
    if isinstance(turn_timeout, Mapping):
        by_role = tuple(
            (str(getattr(role, "value", role)), float(s)) for role, s in turn_timeout.items()
        )
        return Deadlines(role_timeout=by_role)
    return Deadlines(turn_timeout=turn_timeout)


def _factory(policies: Policies) -> Callable[[Scenario], Any]:
    """Each scenario's role map: what a factory makes, or the one role map."""
    if callable(policies) and not isinstance(policies, Mapping):
        return policies
    return lambda scenario: policies
