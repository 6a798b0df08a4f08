"""``chaosops eval``: several policies over the suites, the evaluation table,
its JSON and chart."""

from __future__ import annotations

import shlex
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from chaosops.evaluation import render_table, rows_to_json, write_pass_chart, write_reward_chart
from chaosops.outputs import EVAL_FILE, ResultsReader, atomic_write_bytes
from chaosops.pairing import Outcome, Paired, no_shared_note, paired, render_paired_table
from chaosops.role_figures import render_role_table
from chaosops.runs.batches import stop_code, withheld_note
from chaosops.runs.engine import (
    Play,
    open_folders,
    open_play,
    play_all,
    same_plan,
    seat_players,
    unplayed,
)
from chaosops.runs.folder import RunFolder, played, refuse_existing
from chaosops.runs.session import Session
from chaosops.samples import render_sample_table

from ._config import RunConfig
from ._errors import CLIError, note, said
from ._progress import ProgressBar, trouble
from ._telemetry import start_telemetry
from ._terminal import configure_logs, console_for


def _check_outputs(out: Path, outputs: tuple[tuple[Path | None, str | None, str], ...]) -> None:
    """Refuse (:class:`CLIError`, exit 2) the evaluation's output paths, each
    ``(path or None, the value given or None, option)``, before any episode
    runs: ``--out`` not a folder, a parent folder that cannot be made or written
    in, a path that is a folder, and (like ``chaosops run``) a file an earlier
    evaluation wrote. Writes nothing."""

    for path, given, option in outputs:
        if path is None:
            continue
        shown = f"{option} {path}" if given else f"--out {out}"
        parent = path.parent
        if not given and out.exists() and not out.is_dir():
            raise CLIError(f"--out {out} is a file, not a folder; pass a folder for the evaluation")
        if path.is_dir():
            raise CLIError(f"{option} {path} is a folder; pass a file path")
        existing = parent  # the nearest folder that exists: the rest is made at the end
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        try:
            if not existing.is_dir():
                raise NotADirectoryError(20, f"{existing} is not a folder")
            with tempfile.TemporaryFile(dir=existing):
                pass
        except OSError as exc:
            raise CLIError(
                f"{shown}: cannot write in folder {parent}: {exc.strerror or exc}; "
                f"pass another {option if given else '--out'}"
            ) from None
    for path, given, option in outputs:
        if path is None:
            continue
        if given:
            refuse_existing(path, f"pass another {option} path, or remove that file")
        else:
            refuse_existing(
                path, f"pass another --out folder, or remove {path} to replace it", folder=out
            )


def _check_resumed_entries(out: Path, entries: Sequence[RunConfig]) -> None:
    """``eval --resume`` goes on with the policies the evaluation in ``out``
    played: a policy it did not play is refused, naming those it did."""
    missing = [entry.out.name for entry in entries if not RunFolder(entry.out).holds_a_run()]
    if not missing:
        return
    played_here = (
        sorted(p.name for p in out.iterdir() if RunFolder(p).holds_a_run()) if out.is_dir() else []
    )
    if not played_here:
        raise CLIError(
            f"--resume: {out} holds no evaluation to resume; run without --resume to start one"
        )
    raise CLIError(
        f"--resume: the evaluation in {out} played {', '.join(played_here)}, not "
        f"{', '.join(missing)}; resume it with --policies {','.join(played_here)} (or their "
        "run files), or evaluate the others into a new --out folder"
    )


def cmd_eval(config: RunConfig, entries: Sequence[RunConfig], session: Session) -> int:
    """``chaosops eval``: every entry (a run file, or a policy) over one plan,
    each into a run folder of its own under ``--out``; returns the exit code."""
    json_path, chart = _output_paths(config)
    planned = same_plan(entries)
    # where the evaluation goes can take it and holds no earlier one, before any episode runs
    if not config.resume:
        _check_outputs(
            config.out, ((json_path, config.json, "--json"), (chart, config.chart, "--chart"))
        )
    if config.resume:
        _check_resumed_entries(config.out, entries)
    plays = [open_play(entry, planned) for entry in entries]
    start_telemetry(config.telemetry, session)  # fails before anything is written
    for play in plays:
        seat_players(play)
    own = [p for p in (json_path, chart) if p is not None]
    own += [path for play in plays for path in play.folder.files]
    table_stream = configure_logs(config.telemetry.log_json, own, session)
    if config.json == "-":
        table_stream = sys.stderr
    open_folders(plays)
    progress = ProgressBar(
        enabled=config.progress, total=sum(play.todo() for play in plays), label="eval"
    )
    stop, _ = play_all(plays, config, session, progress)
    return _report(config, plays, stop, progress, (json_path, chart, table_stream))


def _report(
    config: RunConfig,
    plays: Sequence[Play],
    stop: Any,
    progress: Any,
    where: tuple[Path | None, Path | None, Any],
) -> int:
    """The table, the evaluation's JSON and chart, and the closing notes."""

    json_path, chart, table_stream = where
    interrupted = stop.signum is not None or stop.reason is not None
    episodes = sum(play.played.data["episodes"] for play in plays)
    if interrupted and not episodes:
        if stop.reason is not None:
            raise CLIError(
                f"{said(stop.reason)}; no episode had finished{withheld_note(stop)}: no evaluation "
                "written",
                code=1,
            )
        note("interrupted before any episode finished; no evaluation written")
        return stop_code(stop)
    rows = [row for play in plays for row in play.played.rows]
    title = (
        "chaosops eval (interrupted: finished episodes only)" if interrupted else "chaosops eval"
    )
    samples = [row for play in plays for row in play.played.samples]
    pairs = _pairs(plays)
    payload = {
        **_payload(plays, episodes, rows, interrupted),
        "paired": [p.to_json() for p in pairs],
    }
    # the files first: a reader that goes away (| head) stops the printing, never the writing
    _write(config, json_path, chart, payload, rows, interrupted)
    if samples and chart is not None and not interrupted:
        _write_pass_chart(samples, chart)
    console = console_for(table_stream)
    console.print(render_table(rows, title=title))
    if pairs:
        console.print(render_paired_table(pairs, title=f"paired against {pairs[0].against}"))
    for pair in pairs:
        if not pair.scenarios:
            note(no_shared_note(pair.policy, pair.against))
    roles = [figures for play in plays for figures in play.played.roles]
    console.print(render_role_table(roles, title="turns by role"))
    if samples:
        console.print(render_sample_table(samples, title="samples"))
    for line in trouble(plays, progress):
        note(line)
    return _closing(config, plays, episodes, stop)


def _pairs(plays: Sequence[Play]) -> list[Paired]:
    """Each policy after the first, paired against the first on the episodes
    both finished (the same plan: the same scenarios and samples)."""
    if len(plays) < 2:
        return []
    outcomes = [_outcomes(play.folder.results_path) for play in plays]
    first = plays[0].label
    return [
        paired(play.label, first, mine, outcomes[0])
        for play, mine in zip(plays[1:], outcomes[1:], strict=True)
    ]


def _outcomes(results: Path) -> dict[str, Outcome]:
    """Each finished episode's return and resolution, by its scenario and sample."""
    found: dict[str, Outcome] = {}
    for record in ResultsReader(results):
        key = record["run_key"].split("/", 1)[1]  # without the policy's label
        found[key] = (float(record["cumulative_reward"]), bool(record["resolved"]))
    return found


def _payload(plays: Sequence[Play], episodes: int, rows: Any, interrupted: bool) -> dict[str, Any]:
    return {
        "policies": [play.label for play in plays],
        "episodes_per_policy": len(plays[0].keys),
        "episodes": episodes,
        "complete": not interrupted,
        "entries": [
            {"policy": play.label, "folder": str(play.config.out), **played(play.config.spec)}
            for play in plays
        ],
        "rows": _rows_json(rows),
        "samples": [row.to_json() for play in plays for row in play.played.samples] or None,
    }


def _write_pass_chart(samples: Sequence[Any], chart: Path) -> None:
    """pass@1 and pass@k beside the reward chart (``eval_pass_at_k_by_tier.png``)."""
    stem = chart.stem
    stem = stem.replace("reward", "pass_at_k") if "reward" in stem else f"{stem}_pass_at_k"
    path = chart.with_name(f"{stem}.png")
    try:
        if write_pass_chart(samples, path):
            note(f"wrote {path}")
    except OSError as exc:
        raise CLIError(f"cannot write the chart {path}: {exc.strerror or exc}", code=1) from None


def _closing(config: RunConfig, plays: Sequence[Play], episodes: int, stop: Any) -> int:
    total = sum(len(play.keys) for play in plays)
    if stop.reason is not None:
        raise CLIError(
            f"{said(stop.reason)}; evaluation of the {episodes} of {total} episode(s) that "
            f"finished{withheld_note(stop)} written (complete: false, no chart); each "
            "folder goes on with --resume",
            code=1,
        )
    if stop.signum is not None:
        note(
            f"interrupted: evaluation of the {episodes} of {total} episode(s) that "
            "finished (no chart); finish it with the same chaosops eval command and "
            f"--resume --out {shlex.quote(str(config.out))}"
        )
        return stop_code(stop)
    note("wrote a run folder per policy: " + ", ".join(str(p.config.out) for p in plays))
    if lines := unplayed(plays):
        for line in lines:
            note(line)
        return 1
    return 0


def _output_paths(config: RunConfig) -> tuple[Path | None, Path | None]:
    """The JSON table's file (None: stdout) and the chart's (None: no chart)."""
    if config.chart == "-":
        raise CLIError("--chart takes a file for the PNG; '-' (standard output) is for --json only")
    if config.json == "-" and config.telemetry.log_json == "-":
        raise CLIError("--json - and --log-json - both write to stdout; send one to a file")
    json_path = None if config.json == "-" else Path(config.json or config.out / EVAL_FILE)
    chart = (
        Path(config.chart or config.out / "eval_reward_by_tier.png") if config.draw_chart else None
    )
    if json_path is not None and chart is not None and json_path.resolve() == chart.resolve():
        raise CLIError(
            f"--json and --chart both name {str(json_path)!r}: the chart would replace the "
            "evaluation; give them different files"
        )
    return json_path, chart


def _rows_json(rows: Any) -> Any:

    return rows_to_json(rows)


def _write(
    config: RunConfig,
    json_path: Path | None,
    chart: Path | None,
    payload: dict[str, Any],
    rows: Any,
    interrupted: bool,
) -> None:
    """The JSON table (a file or stdout) and, for a complete evaluation, the chart."""

    data = orjson.dumps(payload, option=orjson.OPT_INDENT_2) + b"\n"
    where: Path | None = json_path
    try:
        if config.json == "-":
            sys.stdout.write(data.decode())
            sys.stdout.flush()
        elif json_path is not None:
            json_path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(json_path, data)
            note(f"wrote {json_path}" + (" (complete: false)" if interrupted else ""))
        where = chart
        if chart is not None and not interrupted:
            chart.parent.mkdir(parents=True, exist_ok=True)
            if write_reward_chart(rows, chart):
                note(f"wrote {chart}")
            else:
                note("matplotlib is not installed; no chart (pip install 'chaosops[plot]')")
    except OSError as exc:
        raise CLIError(
            f"cannot write the evaluation to {where or 'stdout'}: {exc.strerror or exc}", code=1
        ) from None
