"""Crash-safe output files of ``chaosops run``: the records (:mod:`.records`),
files written whole or read a line at a time (:mod:`.files`), recovery after
a killed run (:mod:`.recovery`) and the folder's writer (:mod:`.writer`).

An output folder holds:

- ``results.jsonl``: one JSON object per line, one line per finished episode
  (:func:`result_record`), including every applied action, so that
  ``chaosops replay`` needs nothing else;
- ``trajectories.jsonl``: one JSON object per applied step
  (:func:`trajectory_records`): the rendered prompt, the raw completion, the
  action, the rewards, and token ids / logprobs when the policy recorded them;
- ``summary.json``: the evaluation table of the whole folder, written at the end.

Crash safety:

- each episode's trajectory lines go out in one ``write()`` *before* its
  results line, and the results line goes out in one ``write()`` of a complete
  line on an unbuffered file, so a process killed at any moment leaves whole
  lines only (at worst one torn last line), and a results line implies that
  its trajectory is complete;
- ``summary.json`` and a rewritten ``trajectories.jsonl`` are written to a
  temporary file in the same folder and moved into place with ``os.replace``;
- one run at a time per folder: :meth:`RunOutputs.open` takes an exclusive
  lock (``flock``) on ``results.jsonl``, held until :meth:`RunOutputs.close`
  or the process's end (a killed run holds nothing), and refuses a folder
  whose lock another process holds (two writers would duplicate episodes
  and split the trajectories between two files);
- :meth:`RunOutputs.open` with ``resume=True`` truncates a torn last line of
  ``results.jsonl``, keeps the first line of a run key recorded twice, drops
  an episode whose trajectory lost a line (its results line too: it runs
  again), drops trajectory lines of episodes that have no results line, and
  reports the plan indices already done so that they are skipped (a bytearray
  over the plan: resuming holds a few bytes per planned episode).

A *run key* identifies one planned episode: policy, failure type, difficulty,
seed, max steps and the occurrence index of that scenario in the plan (so a
suite that lists the same scenario twice runs it twice, also across a resume).
"""

from __future__ import annotations

from .files import (
    OutputError,
    ResultsReader,
    atomic_write_bytes,
    atomic_write_lines,
    being_written,
    iter_lines,
    read_object,
    read_results,
    results_file,
)
from .records import (
    EVAL_FILE,
    LOG_FILE,
    RESULTS_FILE,
    RUN_RECORD,
    SUMMARY_FILE,
    TRAJECTORIES_FILE,
    ListedKeys,
    Renderer,
    ResultLine,
    StepLine,
    action_json,
    deadline_fields,
    dumps_line,
    episode_lines,
    parse_run_key,
    plan_keys,
    result_record,
    run_key,
    scenario_fields,
    scenario_from_record,
    trajectory_records,
)
from .recovery import ResumeState
from .writer import RunOutputs

__all__ = [
    "EVAL_FILE",
    "LOG_FILE",
    "RESULTS_FILE",
    "RUN_RECORD",
    "SUMMARY_FILE",
    "TRAJECTORIES_FILE",
    "ListedKeys",
    "OutputError",
    "Renderer",
    "ResultLine",
    "ResultsReader",
    "ResumeState",
    "RunOutputs",
    "StepLine",
    "action_json",
    "atomic_write_bytes",
    "atomic_write_lines",
    "being_written",
    "deadline_fields",
    "dumps_line",
    "episode_lines",
    "iter_lines",
    "parse_run_key",
    "plan_keys",
    "read_object",
    "read_results",
    "result_record",
    "results_file",
    "run_key",
    "scenario_fields",
    "scenario_from_record",
    "trajectory_records",
]
