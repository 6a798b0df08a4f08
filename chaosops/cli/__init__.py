"""The ``chaosops`` command: run, eval, replay, scenarios, watch, view,
transcript, serve and mock-llm.

See ``docs/cli.md`` for the commands, their options and the output files.

Exit codes: 0 success; 1 a runtime failure (an unreachable LLM endpoint, an
unwritable output folder, a replay mismatch, an episode that failed); 2 bad
input (an unknown option value, a missing or invalid scenario file, an output
folder that already holds a run); 130 interrupted by Ctrl-C (SIGINT), 143 by
SIGTERM; 141 when stdout was closed. Every error is one line on stderr,
``chaosops: error: ...``.

The command parses, merges (defaults < run file < run.json on resume <
argv), builds a run configuration, hands it to the run engine
(:mod:`chaosops.runs`) and renders what it returns. Modules: ``_args`` (the
parser, generated from the engine's option table), ``_run_file``
(``--config`` files), ``_resume`` (options restored from run.json),
``_config`` (arguments to ``RunConfig``, eval's entries), ``_progress`` (the
progress bar), ``_terminal`` (consoles, JSON logs), ``_telemetry`` (metrics,
traces), ``_folders`` and ``_errors``; one module per command (``_run``,
``_eval``, ``_replay``, ``_scenarios``, ``_watch`` for watch and transcript,
``_view``, ``_serve``, ``_mock``) and ``_main`` (dispatch). The console
script enters through ``chaosops._entry``.
"""

from __future__ import annotations

from ._args import build_parser
from ._errors import CLIError
from ._main import main

__all__ = ["CLIError", "build_parser", "main"]
