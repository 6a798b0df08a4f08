"""Runs from Python written to a run folder, as ``chaosops run`` writes one.

``run_to_folder(out, scenarios, policies, name="heuristic")`` plays a batch
with the runner API and writes, as each episode finishes, ``results.jsonl``
and ``trajectories.jsonl``, then ``summary.json``; ``run.json`` records the
scenarios and options before the first episode, and ``log.jsonl`` the run's
events. ``chaosops view``, ``watch``, ``transcript`` and ``replay`` read the
folder; ``resume=True`` (or ``chaosops run --resume --out DIR``, when ``name``
is a policy the command knows) plays only what is missing.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

import actors
from chaosops import __version__
from chaosops.agents.llm.render import build_messages
from chaosops.agents.runner import Policies, TurnTimeoutArg, open_batch
from chaosops.env.models import AgentRole
from chaosops.env.world_sim import Scenario
from chaosops.outputs import (
    LOG_FILE,
    RUN_FILE,
    ResultsReader,
    RunOutputs,
    atomic_write_bytes,
    plan_keys,
    read_object,
    scenario_fields,
)
from chaosops.summary import Summary, summarise

__all__ = ["arun_to_folder", "run_to_folder"]


def run_to_folder(
    out: str | Path, scenarios: Iterable[Scenario], policies: Policies, **options: Any
) -> Summary:
    """Synchronous :func:`arun_to_folder` (``options``: its keyword arguments)."""
    return actors.run(functools.partial(arun_to_folder, out, scenarios, policies, **options))


async def arun_to_folder(
    out: str | Path,
    scenarios: Iterable[Scenario],
    policies: Policies,
    *,
    name: str = "python",
    concurrency: int = 64,
    turn_timeout: TurnTimeoutArg = None,
    resume: bool = False,
    log: bool = True,
) -> Summary:
    """Play ``scenarios`` with ``policies`` (a role map or a factory, as
    :func:`~chaosops.agents.runner.arun_batch` takes) into the run folder
    ``out``; returns its summary. ``name`` is what the outputs call the policy.

    Without ``resume`` a folder that already holds a run is refused
    (:class:`~chaosops.outputs.OutputError`); with it, the episodes done are
    kept and the others played. ``log`` points ``actors``' structured log at
    the folder's ``log.jsonl`` for the run (where ``watch`` and ``view`` see
    the episodes in flight), as ``chaosops run`` does; it replaces a logging
    set up before.
    """
    out, planned = Path(out), list(scenarios)
    keys = plan_keys(name, planned)
    with RunOutputs(out, keys=keys, resume=resume) as outputs:
        state = outputs.state
        if read_object(out / RUN_FILE) is None:
            options = _run_options(name, planned, turn_timeout)
            atomic_write_bytes(out / RUN_FILE, orjson.dumps(options, option=orjson.OPT_INDENT_2))
        done = state.done or bytearray(len(keys))
        todo = [i for i in range(len(keys)) if not done[i]]
        if log:
            actors.configure_logging(out / LOG_FILE)
        # every role is played by what ``name`` names: the table's "played by"
        roles = {role.value: {"policy": name, "model": None} for role in AgentRole}
        async with open_batch([planned[i] for i in todo], policies, concurrency=concurrency,
                              turn_timeout=turn_timeout) as results:  # fmt: skip
            async for index, result in results:
                outputs.write_episode(result, policy=name, key=keys[todo[index]], roles=roles,
                                      render=build_messages, turn_timeout=turn_timeout)  # fmt: skip
        summary = summarise(ResultsReader(outputs.results_path), keys)
        outputs.write_summary(summary.data)
    return summary


def _run_options(
    name: str, planned: list[Scenario], turn_timeout: TurnTimeoutArg
) -> dict[str, Any]:
    """run.json of a run from Python: its scenarios listed (no suite file
    holds them), the name of its policy and its deadlines."""
    per_role = (
        {str(getattr(role, "value", role)): s for role, s in turn_timeout.items()}
        if isinstance(turn_timeout, Mapping)
        else None
    )
    return {
        "policy": name,
        "planned": len(planned),
        "scenarios": [scenario_fields(s) for s in planned],
        "turn_timeout": None if per_role is not None else turn_timeout,
        "role_timeout": per_role,
        "version": __version__,
    }
