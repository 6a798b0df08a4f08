"""The run engine: what ``chaosops run``, ``eval`` and ``serve`` play, as a library.

A run is a :class:`RunConfig`: its :class:`RunSpec` (what it plays, and
how it is paced and stopped: what run.json records and ``--resume``
compares), where it writes and how it is watched;
its :class:`Plan` lists the planned episodes (``plan_episodes``); a play
(``open_play``) owns the run folder and its files, run.json included, and
``play_all`` plays the episodes not done yet into it, locally or on Ray, with
the stop rules (signals, LLM failures, policy errors); ``replay_records``
checks a folder's results against the world. ``run_to_folder`` plays
scenarios with policies from Python into a run folder. Every failure is a
:class:`RunError`, one line.

Modules: ``spec`` (the spec of a run), ``config`` (the run configuration),
``options`` and ``values`` (the options of a run, declared once, and their
value types), ``plan`` (suites,
planned episodes, deadlines), ``kinds`` (the model kinds a policy can play,
each declared once), ``models`` (their models made ready: endpoints checked,
checkpoints loaded), ``policies`` (policy factories),
``folder`` (what a run folder records, checks before writing), ``engine``
(plays into their folders), ``batches`` (batch execution, stop rules),
``stopping`` (signals while a run stops), ``cluster`` (Ray), ``session``,
``replay``, ``python`` (runs from Python) and ``errors``.
"""

from __future__ import annotations

from .config import RunConfig, Telemetry
from .errors import RunError
from .plan import (
    Plan,
    PlannedEpisode,
    effective_timeout,
    expand_episodes_per_type,
    load_suites,
    plan_episodes,
    timeout_groups,
)
from .policies import policy_factory
from .python import arun_to_folder, run_to_folder
from .replay import Mismatch, replay_records
from .spec import Deadlines, RunSpec

__all__ = [
    "Deadlines",
    "Mismatch",
    "Plan",
    "PlannedEpisode",
    "RunConfig",
    "RunError",
    "RunSpec",
    "Telemetry",
    "arun_to_folder",
    "effective_timeout",
    "expand_episodes_per_type",
    "load_suites",
    "plan_episodes",
    "policy_factory",
    "replay_records",
    "run_to_folder",
    "timeout_groups",
]
