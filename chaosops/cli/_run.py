"""``chaosops run``: one configuration over the suites, outputs written as episodes finish."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from chaosops.evaluation import render_table
from chaosops.outputs import LOG_FILE, OutputError, ResultsReader
from chaosops.role_figures import render_role_table
from chaosops.runs.batches import stop_code, withheld_note
from chaosops.runs.engine import Play, open_folders, open_play, play_all, seat_players, unplayed
from chaosops.runs.folder import build_summary
from chaosops.runs.plan import plan_episodes
from chaosops.runs.session import Session
from chaosops.samples import render_sample_table

from ._config import RunConfig
from ._errors import CLIError, RunError, note, os_error_in, os_error_line, said
from ._folders import LATEST, point_latest
from ._progress import ProgressBar, trouble
from ._telemetry import start_telemetry
from ._terminal import configure_logs, console_for


def cmd_run(config: RunConfig, session: Session) -> int:
    """``chaosops run``; returns the exit code."""
    play = open_play(config, plan_episodes(config.spec))
    start_telemetry(config.telemetry, session)  # fails before anything is written
    # the LLM endpoints, then the log target, fail (one line naming it) before
    # the folder is made (and before an empty log file is left behind)
    seat_players(play)
    config = play.config
    log = config.telemetry.log_json
    # a log in the run's folder is opened once the folder is ours (locked):
    # a refused run leaves no file there; a log elsewhere fails first
    in_folder = log is not None and Path(log) == config.out / LOG_FILE
    if not in_folder:
        table_stream = configure_logs(log, play.folder.files, session)
    open_folders([play])
    if in_folder:
        try:
            table_stream = configure_logs(log, play.folder.files, session)
        except RunError:
            play.folder.close()
            raise
    if config.point_latest:
        _point_latest(config.out)
    try:
        progress = ProgressBar(enabled=config.progress, total=play.todo(), label=play.label)
        stop, _ = play_all([play], config, session, progress)
    except (OSError, BaseExceptionGroup) as exc:
        # A write failed mid-run (a full disk under the folder or the log):
        # one line, and what finished is kept for --resume.
        error = os_error_in(exc)
        if error is None:
            raise
        raise CLIError(f"{os_error_line(error)}; {_kept_after_failure(play)}", code=1) from None
    return _finish(play, session, stop, progress, table_stream)


def _point_latest(folder: Path) -> None:

    if not point_latest(folder):
        note(f"{LATEST} is not a link made by chaosops (a folder?): left as it is")


def _finish(play: Play, session: Session, stop: Any, progress: Any, table: Any) -> int:
    """The table and the closing notes; the exit code."""

    config, folder, summary = play.config, play.folder, play.played.data
    if stop.reason is not None:
        raise CLIError(
            f"{said(stop.reason)}; {progress.done} episode(s) finished this run"
            f"{withheld_note(stop)}, "
            f"kept in {folder.results_path}; finish it with {resume_command(config.out)}",
            code=1,
        )
    if stop.signum is not None:
        note(
            "interrupted: " + f"{progress.done} episode(s) finished this run, kept in "
            f"{folder.results_path}; finish it with {resume_command(config.out)}"
        )
        return stop_code(stop)
    console = console_for(table)
    console.print(render_table(play.played.rows, title=f"chaosops run: {config.out}"))
    console.print(render_role_table(play.played.roles, title="turns by role"))
    if play.played.samples:
        console.print(render_sample_table(play.played.samples, title="samples"))
    for line in trouble([play], progress):
        note(line)
    if session.stdout_gone():
        note("stdout was closed by its reader: the log stopped printing there, the run went on")
    # run.json only when this run wrote it (a resumed run keeps the folder's)
    kept = f", {play.folder.record_path}" if play.folder.wrote_record else ""
    log = config.telemetry.log_json
    if log is not None and Path(log) == config.out / LOG_FILE:
        kept += f", {log}"
    note(f"wrote {folder.results_path}, {folder.trajectories_path}, {folder.summary_path}{kept}")
    if summary["failed"]:
        note(f"{summary['failed']} episode(s) failed (see 'error' in {folder.results_path})")
        return 1
    if lines := unplayed([play]):
        for line in lines:
            note(line)
        return 1
    return 0


def _kept_after_failure(play: Play) -> str:
    """After a failed write: ``summary.json`` rewritten if it can be (complete:
    false), and the line's advice naming what is kept."""

    folder = play.folder
    folder.close()
    again = f"finish it with {resume_command(folder.out_dir)}"
    try:
        summary = build_summary(ResultsReader(folder.results_path), play.keys, play.config.spec)
        folder.write_summary(summary)
    except (OSError, OutputError):  # the same full disk, most likely: what is there stays
        return f"what finished is kept in {folder.results_path}; {again}"
    if not summary["episodes"]:
        return f"no episode had finished; {again}"
    return (
        f"the {summary['episodes']} episode(s) that finished are kept in "
        f"{folder.results_path}; {again}"
    )


def resume_command(out: Path) -> str:
    """The exact command that finishes the run in ``out``."""

    return f"chaosops run --resume --out {shlex.quote(str(out))}"
