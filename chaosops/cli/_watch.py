"""``chaosops watch [RUN_DIR]`` and ``chaosops transcript RUN_DIR --episode ID``:
a run followed from its folder, one episode frame by frame or as text."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live

from chaosops.outputs import parse_run_key
from chaosops.viewer.dashboard import Rate, follow, frame_view, run_view, status_line
from chaosops.viewer.frames import frames
from chaosops.viewer.index import NotARun, RunIndex
from chaosops.viewer.listing import episode_lines
from chaosops.viewer.transcript import transcript

from ._errors import CLIError
from ._folders import LATEST, latest_run


def run_path(folder: str | None) -> Path:
    """``folder``, or the latest run when it is None."""

    path = Path(folder) if folder else latest_run()
    if path is None:
        raise CLIError(f"no run in {LATEST}; give a run folder")
    return path


def open_index(folder: str | Path | None) -> Any:
    """The :class:`RunIndex` of ``folder`` (default: the latest run); one line
    (exit 2) for a folder that is not a run."""
    try:
        return RunIndex(run_path(None if folder is None else str(folder)))
    except NotARun as exc:
        raise CLIError(str(exc)) from None


def episode_row(index: Any, wanted: str) -> Any:
    """The finished episode ``wanted`` names: its id, a start of it, its
    scenario (``cascade/hard/seed=97``), one sample of it (``...seed=97#2``)
    or its run key; one line listing the candidates when it names several,
    or saying there is none."""
    row = index.row(wanted)
    if row is not None:
        return row
    key = parse_run_key(wanted)  # the run key's own reader, not a copy of its format
    found = [r for r in index.rows if _names(wanted, key, r)]
    if len(found) == 1:
        return found[0]
    if found:
        shown = ", ".join(f"{r.episode_id[:12]} ({r.handle}, {r.policy})" for r in found[:5])
        more = f" and {len(found) - 5} more" if len(found) > 5 else ""
        raise CLIError(
            f"{wanted!r} names {len(found)} episodes in {index.folder}: {shown}{more}; "
            "give more of the id, or a sample as ...seed=N#K"
        )
    raise CLIError(
        f"no finished episode {wanted!r} in {index.folder} ({len(index.rows)} episodes; "
        "give an id, a start of one, or a scenario as failure/tier/seed=N (#K for a "
        f"sample): chaosops transcript {index.folder} lists them)"
    )


def cmd_watch(
    folder: str | None, episode: str | None, every_s: float, delay_s: float, once: bool = False
) -> int:
    index = open_index(folder)
    console = Console()
    try:
        if once:
            if episode:
                raise CLIError("--once prints the run's dashboard; drop --episode, or --once")
            index.refresh()
            console.print(run_view(index))
        elif episode:
            _play_episode(console, index, episode, delay_s, every_s)
        else:
            _follow_run(console, index, every_s)
    except KeyboardInterrupt:  # the usual way to leave: nothing to report
        pass
    finally:
        index.close()
    return 0


def _names(wanted: str, key: Any, row: Any) -> bool:
    """Whether ``wanted`` (``key``: it read as a run key, or None) names ``row``."""
    if row.episode_id.startswith(wanted) or wanted in (row.scenario, row.handle):
        return True
    scenario = (row.failure_type, row.difficulty, row.seed, row.max_steps)
    return key == (row.policy, scenario, row.sample)


def _follow_run(console: Any, index: Any, every_s: float) -> None:
    rate = Rate()

    def render() -> Any:
        index.refresh()
        return run_view(index, rate.add(len(index.rows)))

    def over() -> bool:
        index.refresh()
        return index.over()

    follow(console, render, over, every_s, status=lambda: status_line(index))


def _play_episode(console: Any, index: Any, wanted: str, delay_s: float, every_s: float) -> None:
    """Wait while the episode is in flight, then show its frames one by one."""
    while index.row(wanted) is None and wanted in index.in_flight and not index.over():
        time.sleep(every_s)
        index.refresh()
    row = episode_row(index, wanted)
    shown = list(frames(index.record(row)))
    title = f"{row.episode_id}  {row.scenario}"
    if not console.is_terminal:
        for frame in shown:
            console.print(frame_view(frame, title))
        return
    with Live(frame_view(shown[0], title), console=console, refresh_per_second=4) as live:
        for frame in shown[1:]:
            time.sleep(delay_s)
            live.update(frame_view(frame, title))


def cmd_transcript(folder: str, episode: str | None) -> int:
    """One episode's transcript; without ``episode``, the run's episodes listed."""
    index = open_index(folder)
    try:
        if episode is None:
            sys.stdout.writelines(episode_lines(index.rows))
            return 0
        row = episode_row(index, episode)
        sys.stdout.write(transcript(index.record(row), index.trajectory(row.episode_id)))
    finally:
        index.close()
    return 0
