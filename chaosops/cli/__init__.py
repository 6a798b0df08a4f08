"""The ``chaosops`` command: run, eval, replay, scenarios, watch, view,
transcript, serve and mock-llm.

See ``docs/cli.md`` for the commands, their options and the output files.

Exit codes: 0 success; 1 a runtime failure (an unreachable LLM endpoint, an
unwritable output folder, a replay mismatch, an episode that failed); 2 bad
input (an unknown option value, a missing or invalid scenario file, an output
folder that already holds a run); 130 interrupted by Ctrl-C (SIGINT), 143 by
SIGTERM; 141 when stdout was closed. Every error is one line on stderr,
``chaosops: error: ...``.

Modules: ``_options`` (the run options' table), ``_args`` and ``_values``
(parser and value types), ``_run_file`` (``--config`` files), ``_resume``
(options restored from run.json), ``_config`` (the frozen ``RunConfig``,
eval's entries), ``_plan`` (suites, planned episodes, deadlines),
``_policies`` (policy factories, LLM setup), ``_run_folder`` (what a run
folder records, checks before writing), ``_plays`` (configurations played
into their folders), ``_batches`` (batch execution, signals), ``_stopping``
(Ctrl-C while a run stops), ``_cluster`` (``--ray``), ``_progress`` (the
progress bar), ``_terminal`` (consoles, notes, JSON logs), ``_telemetry``
(metrics, traces), ``_session``, ``_folders`` and ``_errors``; one module per
command (``_run``, ``_eval``, ``_replay``, ``_scenarios``, ``_watch`` for
watch and transcript, ``_view``, ``_serve``, ``_mock``) and ``_main``
(dispatch). The console script enters through ``chaosops._entry``.
"""

from __future__ import annotations

from ._args import build_parser
from ._errors import CLIError
from ._main import main
from ._plan import (
    Plan,
    PlannedEpisode,
    effective_timeout,
    expand_episodes_per_type,
    load_suites,
    timeout_groups,
)
from ._policies import policy_factory
from ._replay import Mismatch, replay_records
from ._run_folder import build_summary

__all__ = [
    "CLIError",
    "Mismatch",
    "Plan",
    "PlannedEpisode",
    "build_parser",
    "build_summary",
    "effective_timeout",
    "expand_episodes_per_type",
    "load_suites",
    "main",
    "policy_factory",
    "replay_records",
    "timeout_groups",
]
