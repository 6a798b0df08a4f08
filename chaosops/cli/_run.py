"""``chaosops run``: one policy over the suites, outputs written as episodes finish."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaosops import __version__
from chaosops.outputs import RUN_FILE

from ._batches import Batch, execute, plan_batches, stop_code, withheld_note
from ._config import RunConfig
from ._errors import CLIError, os_error_in, os_error_line
from ._plan import PlannedEpisode, plan_episodes
from ._policies import prepare_llms, role_map_factory
from ._resume import RECORDED
from ._run_file import LLM_FLAGS
from ._session import Session
from ._telemetry import serve_metrics, start_tracing
from ._terminal import configure_logs, console_for, note


def build_summary(
    records: Sequence[Mapping[str, Any]], planned: Sequence[str], config: RunConfig | None = None
) -> dict[str, Any]:
    """The content of ``summary.json``: totals, the evaluation rows (with 95%
    intervals), each role's turn figures and, with ``config``, what played
    (each role's policy and model, each LLM's settings without the key).

    Derived from the results records only (no timestamps or wall times), so a
    resumed run ends with the same summary as an uninterrupted one.
    """
    from chaosops.evaluation import evaluate_records, ran_to_end, resolved, rows_to_json
    from chaosops.role_figures import role_figures

    done = {r["run_key"] for r in records}
    missing = [key for key in planned if key not in done]
    return {
        "episodes": len(records),
        "resolved": sum(1 for r in records if resolved(r)),  # the table's rule
        "failed": sum(1 for r in records if not ran_to_end(r)),
        "timeouts": sum(int(r.get("timeouts", 0)) for r in records),
        "errors": sum(int(r.get("errors", 0)) for r in records),
        "planned": len(planned),
        "missing": len(missing),
        "complete": not missing,
        "rows": rows_to_json(evaluate_records(records)),
        "roles": [figures.to_json() for figures in role_figures(records)],
        **({} if config is None else played(config)),
    }


def played(config: RunConfig) -> dict[str, Any]:
    """What played, as summary.json and eval.json say it."""
    return {
        "players": config.players,
        "llms": {name: settings_json(s) for name, s in config.llms_in_play.items()} or None,
    }


def refuse_existing(path: Path, advice: str, *, folder: Path | None = None) -> None:
    """Refuse (:class:`CLIError`, exit 2) to write over ``path`` when it holds
    something: ``chaosops run`` and ``chaosops eval`` never overwrite an earlier
    output. ``folder`` is the output folder the file was put in by default (the
    message then names the folder); ``advice`` says what to do instead."""
    try:
        if path.stat().st_size == 0:
            return
    except OSError:  # absent, or not reachable: whoever writes it reports that
        return
    where = f"output folder {folder} already holds {path.name}" if folder else f"{path} exists"
    raise CLIError(f"{where}; {advice}", code=2)


def plan_digest(planned: Sequence[PlannedEpisode]) -> str:
    """A fingerprint of the planned scenarios (order aside) and the suites' deadlines."""
    import orjson

    from chaosops.outputs import scenario_fields

    entries = sorted(
        orjson.dumps(
            [
                scenario_fields(p.scenario),
                sorted(
                    (str(getattr(k, "value", k)), v) for k, v in (p.suite_timeout or {}).items()
                ),
            ]
        )
        for p in planned
    )
    return hashlib.sha256(b"\n".join(entries)).hexdigest()[:16]


def run_options(config: RunConfig, planned: Sequence[PlannedEpisode]) -> dict[str, Any]:
    """The content of ``run.json``: what decides the episodes and their outcomes
    (not ``--concurrency``, the LLM endpoint, logging or progress)."""
    options: dict[str, Any] = {
        "policy": config.policy,
        "name": config.name,
        "role_policies": dict(config.role_policies) or None,
        "paths": [str(p) for p in config.paths],
        "episodes_per_type": config.episodes_per_type,
        "seed_offset": config.seed_offset,
        "tiers": list(config.tiers) or None,
        "failure_types": list(config.failure_types) or None,
        "limit": config.limit,
        "planned": len(planned),
        "plan": plan_digest(planned),
        "turn_timeout": config.deadlines.turn_timeout,
        "role_timeout": config.deadlines.per_role,
    }
    if "llm" in config.policy_by_role.values():
        llm = config.llm
        options.update(llm_model=llm.model, temperature=llm.temperature, max_tokens=llm.max_tokens)
    if llms := config.llms_in_play:
        options["llms"] = {name: settings_json(settings) for name, settings in llms.items()}
    options.update(
        concurrency=config.concurrency,
        llm_max_failures=config.llm_max_failures,
        config_file=config.config_file,
        version=__version__,
    )
    return options


def settings_json(settings: Any) -> dict[str, Any]:
    """An LLM's settings as run.json and summary.json record them: every field
    but the key (``api_key_env`` names where it is read from)."""
    import dataclasses

    fields = dataclasses.asdict(settings)
    del fields["api_key"]
    fields["extra_body"] = dict(settings.extra_body) if settings.extra_body else None
    return fields


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_shown(v)}" for k, v in value.items())
    return str(value)


def _suites_shown(options: Mapping[str, Any]) -> str:
    return " ".join(options.get("paths") or []) or "the canonical suites"


# (run.json field, option named in the message); compared in this order
_MUST_MATCH = tuple(
    ("plan", "PATH (the suites)") if field == "paths" else (field, options[0])
    for field, _, options, _ in RECORDED
)


def check_resume(
    out: Path, options: Mapping[str, Any], keys: Sequence[str], label: str | None = None
) -> dict[str, Any] | None:
    """Refuse (:class:`CLIError`, exit 2) to resume the run in ``out`` with other
    options than it was started with; nothing is written. Returns the recorded
    options (``None`` for a folder without ``run.json``).

    A folder without ``run.json`` (written before it existed) is checked against
    its results: their policy, and every recorded episode in the given plan.
    """
    import orjson

    from chaosops.outputs import RESULTS_FILE, OutputError, read_results

    def refuse(option: str, recorded: str, given: str) -> CLIError:
        return CLIError(
            f"--resume: {option} differs from the run in {out}: recorded {recorded}, "
            f"given {given}; give the options of that run, or a new --out folder"
        )

    recorded: dict[str, Any] | None = None
    path = out / RUN_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise CLIError(f"cannot read {path}: {exc.strerror or exc}", code=1) from None
    else:
        try:
            recorded = orjson.loads(data)
        except orjson.JSONDecodeError:
            recorded = None
        if not isinstance(recorded, dict):
            raise CLIError(
                f"{path} is not a chaosops run file (expected the JSON object of the "
                "run's options); resume with a folder written by chaosops run"
            )
        given = orjson.loads(orjson.dumps(options))  # as read back from run.json
        for name, option in _MUST_MATCH:
            if name not in recorded or name not in given or recorded[name] == given[name]:
                continue
            if name == "plan":
                before, now = _suites_shown(recorded), _suites_shown(given)
                edited = " as it reads now" if before == now else ""  # same paths
                raise refuse(
                    option,
                    f"{before} ({recorded.get('planned')} episodes)",
                    f"{now}{edited} ({given['planned']} episodes)",
                )
            raise refuse(option, _shown(recorded[name]), _shown(given[name]))
        if (differs := _llm_difference(recorded, given)) is not None:
            raise refuse(*differs)

    if not (out / RESULTS_FILE).exists():
        return recorded
    try:
        records, _ = read_results(out / RESULTS_FILE)
    except OutputError as exc:
        raise CLIError(str(exc), code=2 if exc.usage else 1) from None
    policies = sorted({str(r.get("policy")) for r in records})
    label = label or options["policy"]  # what the records call the policy that played
    if policies and policies != [label]:
        raise refuse("--policy", ", ".join(policies), label)
    planned = set(keys)
    stray = [r["run_key"] for r in records if r["run_key"] not in planned]
    if stray:
        raise refuse(
            "the plan (PATH, --episodes-per-type, --seed-offset)",
            f"episode {stray[0]}" + (f" and {len(stray) - 1} more" if len(stray) > 1 else ""),
            f"a plan without it ({len(keys)} episodes of {_suites_shown(options)})",
        )
    return recorded


# what an LLM's answers depend on: a resumed run must ask the same way
_LLM_DECIDES = ("model", "temperature", "top_p", "seed", "max_tokens", "answer", "history")
_FLAG_OF = {field: options[0] for field, _, options in LLM_FLAGS}


def _llm_difference(
    recorded: Mapping[str, Any], given: Mapping[str, Any]
) -> tuple[str, str, str] | None:
    """The first setting of an LLM in play that differs: (option, recorded, given)."""
    before, now = recorded.get("llms") or {}, given.get("llms") or {}
    for name in sorted(set(before) & set(now)):
        for field in _LLM_DECIDES:
            old, new = before[name].get(field), now[name].get(field)
            if old != new:
                option = _FLAG_OF[field] if name == "llm" else f"the run file's llm.{name}.{field}"
                return option, _shown(old), _shown(new)
    return None


@dataclass
class _Run:
    """One ``chaosops run`` as it goes: its plan, its outputs, what it wrote."""

    config: RunConfig
    session: Session
    planned: list[PlannedEpisode]
    keys: list[str]
    options: dict[str, Any]
    outputs: Any
    recorded: dict[str, Any] | None = None
    wrote_run_file: bool = False
    factory: Any = None  # scenario -> role map, each role's policy


def cmd_run(config: RunConfig, session: Session) -> int:
    """``chaosops run``; returns the exit code."""
    from chaosops.outputs import OutputError, RunOutputs, plan_keys

    planned = plan_episodes(config)
    keys = plan_keys(config.label, [p.scenario for p in planned])
    outputs = RunOutputs(config.out, resume=config.resume, fsync=config.fsync)
    run = _Run(config, session, planned, keys, run_options(config, planned), outputs)
    _check_folder(run)
    serve_metrics(config.telemetry)  # a port that cannot be served fails before anything is written
    start_tracing(config.telemetry, session)  # so does a collector that cannot be reached
    # the LLM endpoint, then the log target, fail (one line naming it) before
    # the folder is made (and before an empty log file is left behind)
    llms = prepare_llms(config.llms_in_play, config.config_file)
    run.factory = role_map_factory(config.policy_by_role, llms, planned)
    own_files = (outputs.results_path, outputs.trajectories_path, outputs.summary_path)
    table_stream = configure_logs(
        config.telemetry.log_json, (*own_files, config.out / RUN_FILE), session
    )
    try:
        state = outputs.open()
    except OutputError as exc:
        raise CLIError(str(exc), code=2 if exc.usage else 1) from None
    if config.point_latest:
        _point_latest(config.out)
    try:
        stop, progress, records, summary = _play(run, state, list(llms.values()))
    except (OSError, BaseExceptionGroup) as exc:
        # A write failed mid-run (a full disk under the folder or the log):
        # one line, and what finished is kept for --resume.
        error = os_error_in(exc)
        if error is None:
            raise
        kept = _kept_after_failure(outputs, keys, config)
        raise CLIError(f"{os_error_line(error)}; {kept}", code=1) from None
    finally:
        outputs.close()
    return _finish(run, stop, progress, records, summary, table_stream)


def _point_latest(folder: Path) -> None:
    from ._folders import LATEST, point_latest

    if not point_latest(folder):
        note(f"{LATEST} is not a link made by chaosops (a folder?): left as it is")


def _check_folder(run: _Run) -> None:
    """``--resume``: the folder's run has these options; otherwise: nothing to overwrite."""
    config, outputs = run.config, run.outputs
    if config.resume:
        if config.out.is_dir():
            run.recorded = check_resume(config.out, run.options, run.keys, config.label)
        return
    for path in (outputs.results_path, outputs.trajectories_path, config.out / RUN_FILE):
        refuse_existing(
            path, "pass --resume to continue that run, or a new --out folder", folder=config.out
        )


def _play(run: _Run, state: Any, llms: list[Any]) -> tuple[Any, Any, list[Any], dict[str, Any]]:
    """Write run.json, play the episodes not done yet, write the summary."""
    import orjson

    from chaosops.outputs import atomic_write_bytes

    from ._progress import ProgressBar

    config, outputs, keys = run.config, run.outputs, run.keys
    if run.recorded is None and state.records == 0:
        # a new run (or one begun before run.json existed with nothing done):
        # its options, for --resume to compare, before the first episode
        options = orjson.dumps(run.options, option=orjson.OPT_INDENT_2) + b"\n"
        atomic_write_bytes(config.out / RUN_FILE, options)
        run.wrote_run_file = True
    if config.resume:
        note(
            f"resuming {config.out}: {len(state.done_keys & set(keys))} of {len(keys)} "
            "episodes already done"
            + (", torn last results line dropped" if state.torn_results_line else "")
        )
    todo = [i for i, key in enumerate(keys) if key not in state.done_keys]
    progress = ProgressBar(enabled=config.progress, total=len(todo), label=config.label)
    render = renderer()
    players = config.players

    def on_result(batch: Batch, index: int, result: Any) -> None:
        outputs.write_episode(
            result, policy=config.label, key=keys[index], render=render,
            turn_timeout=batch.turn_timeout, roles=players,
        )  # fmt: skip
        progress.advance(result)

    batches = plan_batches(
        config.deadlines, run.planned, todo, run.factory, tag=config.label, model=config.models
    )
    stop = execute(
        batches, run.session, concurrency=config.concurrency, on_result=on_result,
        progress=progress, llms=llms, max_failures=config.llm_max_failures,
    )  # fmt: skip
    records = outputs.records()
    summary = build_summary(records, keys, config)
    outputs.write_summary(summary)
    return stop, progress, records, summary


def _finish(
    run: _Run, stop: Any, progress: Any, records: list[Any], summary: dict[str, Any], table: Any
) -> int:
    """The table and the closing notes; the exit code."""
    from chaosops.evaluation import evaluate_records, render_table
    from chaosops.role_figures import render_role_table, role_figures

    config, outputs = run.config, run.outputs
    if stop.reason is not None:
        raise CLIError(
            f"{stop.reason}; {progress.done} episode(s) finished this run{withheld_note(stop)}, "
            f"kept in {outputs.results_path}; run again with --resume once the endpoint answers",
            code=1,
        )
    if stop.signum is not None:
        note(
            ("stdout closed: stopped; " if run.session.stdout_gone() else "interrupted: ")
            + f"{progress.done} episode(s) finished this run, kept in "
            f"{outputs.results_path}; run again with --resume to finish"
        )
        return stop_code(stop)
    console = console_for(table)
    console.print(render_table(evaluate_records(records), title=f"chaosops run: {config.out}"))
    console.print(render_role_table(role_figures(records), title="turns by role"))
    for line in progress.trouble():
        note(line)
    # run.json only when this run wrote it (a resumed run keeps the folder's)
    kept = f", {config.out / RUN_FILE}" if run.wrote_run_file else ""
    note(f"wrote {outputs.results_path}, {outputs.trajectories_path}, {outputs.summary_path}{kept}")
    if summary["failed"]:
        note(f"{summary['failed']} episode(s) failed (see 'error' in {outputs.results_path})")
        return 1
    return 0


def _kept_after_failure(outputs: Any, keys: Sequence[str], config: RunConfig) -> str:
    """After a failed write: ``summary.json`` rewritten if it can be (complete:
    false), and the line's advice naming what is kept."""
    from chaosops.outputs import OutputError

    outputs.close()
    try:
        records = outputs.records()
        outputs.write_summary(build_summary(records, keys, config))
    except (OSError, OutputError):  # the same full disk, most likely: what is there stays
        return f"what finished is kept in {outputs.results_path}; run again with --resume"
    if not records:
        return f"no episode had finished; run again with --resume to start {outputs.out_dir}"
    return (
        f"the {len(records)} episode(s) that finished are kept in {outputs.results_path}; "
        "run again with --resume"
    )


def renderer() -> Callable[[Any, Any], Any] | None:
    try:
        from chaosops.agents.llm.render import build_messages
    except ImportError:  # pragma: no cover - the LLM package is part of chaosops
        return None
    return build_messages
