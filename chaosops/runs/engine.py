"""Playing run configurations into their run folders: one for ``chaosops run``,
one per entry for ``chaosops eval``.

Each folder holds what a run writes (results, trajectories, summary, run.json),
so an eval's entries can be resumed, replayed and looked at like any run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Protocol, cast

import actors
from chaosops.outputs import RUN_RECORD, OutputError, ResultsReader, scenario_fields
from chaosops.summary import Summary

from .batches import Batch, Remote, Stop, aexecute, plan_batches
from .cluster import recipe
from .config import RunConfig, traces_url
from .errors import CONTINUE_OR_NEW, RESUME, Message, Named, RunError, note, output_error
from .folder import RunFolder, plan_digest, renderer, run_record, summarise
from .kinds import ray_refusal
from .plan import Plan, PlanKeys, plan_episodes
from .policies import PolicyRecipe, prepare_models, role_map_factory
from .session import Session
from .spec import RunSpec


class Progress(Protocol):
    """What follows a run as it plays (the command's progress bar, or a :class:`Tally`)."""

    done: int

    def __enter__(self) -> Any: ...
    def __exit__(self, *exc_info: object) -> None: ...
    def watch(self, results: Any) -> None: ...
    def advance(self, result: Any) -> None: ...


class Tally:
    """A silent :class:`Progress`: it counts the episodes finished."""

    def __init__(self) -> None:
        self.done = 0

    def __enter__(self) -> Tally:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def watch(self, results: Any) -> None:
        return None

    def advance(self, result: Any) -> None:
        self.done += 1


@dataclass
class Play:
    """One run configuration as it is played: its plan keys and output folder
    (:func:`open_play`), its players (:func:`seat_players`), what is done
    (:func:`open_folders`) and, once played, its summary."""

    config: RunConfig
    planned: Plan
    keys: PlanKeys
    folder: RunFolder
    recorded: dict[str, Any] | None = None  # the folder's run record, when resumed
    llms: dict[str, Any] = field(default_factory=dict)  # model policies (LLM, hf) by name
    factory: Callable[[Any], Any] | None = None  # scenario -> role map
    recipe: PolicyRecipe | None = None  # what Ray workers build the role maps from (--ray)
    done: bytearray = field(default_factory=bytearray)  # 1 at each plan index done
    summary: Summary | None = None  # once played (see :attr:`played`)

    @property
    def label(self) -> str:
        """What the outputs call the play's policy (its spec's label)."""
        return self.config.spec.label

    @property
    def played(self) -> Summary:
        """The summary of the folder, once :func:`play_all` wrote it."""
        if self.summary is None:
            raise RuntimeError("the play has no summary before play_all() wrote it")
        return self.summary

    def todo(self) -> int:
        """How many planned episodes are still to play."""
        return len(self.keys) - self.done.count(1)


def seat_players(play: Play) -> None:
    """The play's players: its LLMs checked (each endpoint settles its answer
    format, which the configuration then records), the role maps' factory,
    and what Ray workers build the role maps from."""
    config = play.config
    for name, settings in config.spec.models_in_play.items() if config.ray is not None else ():
        if (why := ray_refusal(name, settings)) is not None:
            raise RunError(why)
    play.llms, spec = prepare_models(config.spec)
    if play.recorded is not None:  # loaded now: a checkpoint's weights are known
        play.folder.check_models(play.recorded, run_record(spec, play.planned))
    play.config = replace(config, spec=spec)
    play.factory = role_map_factory(spec.policy_by_role, play.llms, play.planned)
    play.recipe = recipe(play.config)


def same_plan(entries: Sequence[RunConfig]) -> Plan:
    """The plan every entry plays; refuses (exit 2) entries that plan differently
    (a comparison is of the same scenarios)."""
    plans = [plan_episodes(entry.spec) for entry in entries]
    first = plan_digest(plans[0])
    for entry, plan in zip(entries[1:], plans[1:], strict=True):
        if plan_digest(plan) != first:
            this, that = (
                entry.spec.config_file or entry.spec.label,
                entries[0].spec.config_file or entries[0].spec.label,
            )
            differs = _difference(plan, this, plans[0], that)
            raise RunError(
                f"{this} plans other episodes than {that}: ",
                differs,
                "; the entries of an evaluation play the same scenarios: give them the same "
                "suites and subsets",
            )
    return plans[0]


def _difference(plan: Plan, name: str, other: Plan, other_name: str) -> str | Message:
    """What tells two plans apart, in words: a scenario one plans and the other
    does not, or else their deadlines."""

    def shown(episode: Any) -> str:
        f = scenario_fields(episode.scenario)
        return (
            f"{f['failure_type']}/{f['difficulty']}/seed={f['seed']} (max_steps {f['max_steps']})"
        )

    mine, theirs = {shown(e) for e in plan}, {shown(e) for e in other}
    if extra := sorted(mine - theirs):
        return f"{name} has {extra[0]}{_more(len(extra))}, which {other_name} has not"
    if extra := sorted(theirs - mine):
        return f"{other_name} has {extra[0]}{_more(len(extra))}, which {name} has not"
    if len(plan) != len(other):
        return Message(f"{len(plan)} episodes against {len(other)} (another ", Named("samples"),
                       ")")  # fmt: skip
    return "the same scenarios under other turn deadlines (the suites' turn_timeout)"


def _more(count: int) -> str:
    return f" and {count - 1} more" if count > 1 else ""


def open_play(config: RunConfig, planned: Plan) -> Play:
    """The play of ``config``, its folder checked (writes nothing): a new folder
    holds no run; with ``resume``, its run has these options."""

    keys = planned.keys(config.spec.label)
    folder = RunFolder(config.out, keys=keys, resume=config.resume, fsync=config.fsync)
    play = Play(config, planned, keys, folder)
    if config.resume:
        if not folder.holds_a_run():
            raise RunError(
                RESUME,
                f": {config.out} holds no run to resume (no {RUN_RECORD} nor results); "
                "run without ",
                RESUME,
                " to start one there",
            )
        play.recorded = folder.check_resume(run_record(config.spec, planned), config.spec.label)
        return play
    folder.refuse_a_run(CONTINUE_OR_NEW)
    return play


def open_folders(plays: Sequence[Play]) -> None:
    """Open each play's folder (made if need be) and, for a new run, write its
    run.json; all are closed again if one cannot be opened."""
    try:
        for play in plays:
            _open(play)
    except BaseException:
        for play in plays:
            play.folder.close()
        raise


def _open(play: Play) -> None:

    try:
        state = play.folder.open()
    except OutputError as exc:
        raise output_error(exc) from None
    play.done = state.done or bytearray(len(play.keys))
    if play.recorded is None and state.records == 0:
        # a new run (or one begun before run.json existed with nothing done):
        # its spec, for --resume to compare, before the first episode
        play.folder.write_record(run_record(play.config.spec, play.planned))
    if play.config.resume:
        note(
            f"resuming {play.config.out}: {state.records} of "
            f"{len(play.keys)} episodes already done"
            + (", torn last results line dropped" if state.torn_results_line else "")
            + (f", {state.duplicate_results} repeated results line(s) dropped (the first "
               "kept)" if state.duplicate_results else "")
            + (f", {state.damaged_episodes} episode(s) whose trajectory lost a line run "
               "again" if state.damaged_episodes else "")
        )  # fmt: skip


def play_all(
    plays: Sequence[Play], config: RunConfig, session: Session, progress: Progress | None = None
) -> tuple[Stop, Progress]:
    """:func:`aplay_all` in a fresh event loop, stopped by SIGINT or SIGTERM."""
    return actors.run(partial(aplay_all, plays, config, session, progress, signals=True))


async def aplay_all(
    plays: Sequence[Play],
    config: RunConfig,
    session: Session,
    progress: Progress | None = None,
    *,
    signals: bool = False,
) -> tuple[Stop, Progress]:
    """Every play's episodes not done yet, each written to its folder as it
    finishes and shown on ``progress``; then each folder's summary. The
    folders (opened by :func:`open_folders`) are closed. ``signals``: SIGINT
    and SIGTERM stop the run (a command's, which owns its process)."""

    progress = progress if progress is not None else Tally()
    if any(play.factory is None for play in plays):
        raise RuntimeError("a play without its players: seat_players() (or a factory) first")
    try:
        batches = [
            batch
            for play in plays
            for batch in plan_batches(play.config.spec.deadlines, play.planned,
                                      play.done, cast(Callable[[Any], Any], play.factory),
                                      tag=play.label, model=play.config.spec.models_played,
                                      remote=_remote(play))
        ]  # fmt: skip
        stop = await aexecute(
            batches, session, concurrency=config.spec.concurrency,
            on_result=_writer(plays, progress), progress=progress,
            llms=[llm for play in plays for llm in play.llms.values()],
            max_failures=config.spec.llm_max_failures, cluster=config.cluster,
            max_policy_errors=config.spec.max_policy_errors, signals=signals,
            llm_roles={play.label: _llm_roles(play.config.spec) for play in plays},
        )  # fmt: skip
        for play in plays:
            write_summary(play)
    finally:
        for play in plays:
            play.folder.close()
    return stop, progress


def _writer(plays: Sequence[Play], progress: Progress) -> Callable[[Batch, int, Any], None]:
    """What writes each finished episode into its play's folder."""
    by_label = {play.label: play for play in plays}
    render = renderer()

    def on_result(batch: Batch, index: int, result: Any) -> None:
        play = by_label[batch.tag]
        if getattr(result, "lines", None):  # made by a Ray worker
            play.folder.write_lines(*result.lines)
        else:
            play.folder.write_episode(
                result, policy=batch.tag, key=play.keys[index], render=render,
                turn_timeout=batch.turn_timeout, roles=play.config.spec.players,
            )  # fmt: skip
        progress.advance(result)

    return on_result


def _llm_roles(spec: RunSpec) -> set[str]:
    """The roles a model plays (an LLM's, on Ray)."""
    models = spec.models_in_play
    return {role for role, name in spec.policy_by_role.items() if name in models}


def _remote(play: Play) -> Remote | None:
    """What the play's Ray workers need; None without ``--ray``."""
    config = play.config
    if config.ray is None:
        return None

    endpoint = config.telemetry.otlp_endpoint
    spans = traces_url(endpoint) if endpoint is not None else None
    return Remote(play.recipe, play.keys, config.spec.players, spans)


def write_summary(play: Play) -> None:
    """The play's summary.json, of every record in its folder (read a line at a time)."""

    play.summary = summarise(ResultsReader(play.folder.results_path), play.keys, play.config.spec)
    play.folder.write_summary(play.played.data)


def unplayed(plays: Sequence[Play]) -> list[str]:
    """One line per role that never played a move of its own: every turn it
    had timed out, failed, or gave an answer that was no legal move."""
    lines = []
    for play in plays:
        for f in play.played.roles:
            if f.turns and not f.legal:
                who = f.played_by if not f.model else f"{f.played_by} ({f.model})"
                lines.append(
                    f"{play.label}: the {f.role} ({who}) never played a move of its own: "
                    f"of {f.turns} turn(s), {f.parse_errors} answer(s) were no legal move, "
                    f"{f.timeouts} timed out, {f.errors} failed; every one played the fallback"
                )
    return lines
