"""The entries of ``chaosops eval``, each played into a run folder of its own.

An entry is a run configuration (a run file, or a policy of ``--policies``);
its folder holds what ``chaosops run`` writes (results, trajectories, summary,
run.json), so it can be resumed, replayed and looked at like any run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaosops.outputs import RUN_FILE

from ._batches import Batch, Stop, execute, plan_batches
from ._config import RunConfig
from ._errors import CLIError
from ._plan import PlannedEpisode, plan_episodes
from ._run import build_summary, check_resume, plan_digest, refuse_existing, run_options
from ._session import Session
from ._terminal import note


@dataclass
class Play:
    """One entry as it is played: its configuration, plan keys and output folder."""

    config: RunConfig
    planned: list[PlannedEpisode]
    keys: list[str]
    outputs: Any  # chaosops.outputs.RunOutputs
    recorded: dict[str, Any] | None = None
    llms: dict[str, Any] = field(default_factory=dict)
    factory: Any = None
    records: list[dict[str, Any]] = field(default_factory=list)
    done: set[str] = field(default_factory=set)  # run keys already in the folder

    def todo(self) -> list[int]:
        """The plan indices still to play."""
        return [i for i, key in enumerate(self.keys) if key not in self.done]

    @property
    def files(self) -> list[Path]:
        """The files this entry writes (which a log must not be)."""
        outputs = self.outputs
        return [outputs.results_path, outputs.trajectories_path, outputs.summary_path,
                self.config.out / RUN_FILE]  # fmt: skip


def same_plan(entries: Sequence[RunConfig]) -> list[PlannedEpisode]:
    """The plan every entry plays; refuses (exit 2) entries that plan differently
    (a comparison is of the same scenarios)."""
    plans = [plan_episodes(entry) for entry in entries]
    first = plan_digest(plans[0])
    for entry, plan in zip(entries[1:], plans[1:], strict=True):
        if plan_digest(plan) != first:
            raise CLIError(
                f"{entry.config_file or entry.label} plans other episodes ({len(plan)}) than "
                f"{entries[0].config_file or entries[0].label} ({len(plans[0])}); the entries of "
                "an evaluation play the same scenarios: give them the same suites and subsets"
            )
    return plans[0]


def open_play(config: RunConfig, planned: list[PlannedEpisode]) -> Play:
    """The entry's play, its folder checked (writes nothing): a new folder holds
    no run; with ``--resume`` its run has the entry's options."""
    from chaosops.outputs import RunOutputs, plan_keys

    keys = plan_keys(config.label, [p.scenario for p in planned])
    play = Play(config, planned, keys, RunOutputs(config.out, resume=config.resume))
    if config.resume and config.out.is_dir():
        options = run_options(config, planned)
        play.recorded = check_resume(config.out, options, keys, config.label)
    elif not config.resume:
        for path in play.files:
            refuse_existing(
                path, "pass --resume to continue it, or another --out", folder=config.out
            )
    return play


def play_all(plays: Sequence[Play], config: RunConfig, session: Session) -> tuple[Stop, Any]:
    """Every entry's episodes not done yet, in one event loop and one progress
    bar, each written to its folder as it finishes; then each folder's summary."""
    from ._progress import ProgressBar
    from ._run import renderer

    for play in plays:
        _open(play)
    try:
        todo = {play.config.label: play.todo() for play in plays}
        total = sum(len(indices) for indices in todo.values())
        progress = ProgressBar(enabled=config.progress, total=total, label="eval")
        by_label = {play.config.label: play for play in plays}
        render = renderer()

        def on_result(batch: Batch, index: int, result: Any) -> None:
            play = by_label[batch.tag]
            play.outputs.write_episode(
                result, policy=batch.tag, key=play.keys[index], render=render,
                turn_timeout=batch.turn_timeout, roles=play.config.players,
            )  # fmt: skip
            progress.advance(result)

        batches = [
            batch
            for play in plays
            for batch in plan_batches(play.config.deadlines, play.planned,
                                      todo[play.config.label], play.factory,
                                      tag=play.config.label, model=play.config.models)
        ]  # fmt: skip
        llms = [llm for play in plays for llm in play.llms.values()]
        stop = execute(
            batches, session, concurrency=config.concurrency, on_result=on_result,
            progress=progress, llms=llms, max_failures=config.llm_max_failures,
        )  # fmt: skip
        for play in plays:
            play.records = play.outputs.records()
            play.outputs.write_summary(build_summary(play.records, play.keys, play.config))
    finally:
        for play in plays:
            play.outputs.close()
    return stop, progress


def _open(play: Play) -> None:
    """Open the entry's folder and, for a new run, write its run.json."""
    import orjson

    from chaosops.outputs import OutputError, atomic_write_bytes

    try:
        state = play.outputs.open()
    except OutputError as exc:
        raise CLIError(str(exc), code=2 if exc.usage else 1) from None
    play.done = state.done_keys
    if play.recorded is None and state.records == 0:
        options = run_options(play.config, play.planned)
        data = orjson.dumps(options, option=orjson.OPT_INDENT_2) + b"\n"
        atomic_write_bytes(play.config.out / RUN_FILE, data)
    if play.config.resume:
        note(f"resuming {play.config.out}: {len(state.done_keys & set(play.keys))} of "
             f"{len(play.keys)} episodes already done")  # fmt: skip
