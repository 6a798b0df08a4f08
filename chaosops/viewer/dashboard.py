"""``chaosops watch``: a live terminal dashboard of a run, read from its folder
(so it follows a run in another process), and one episode frame by frame."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from chaosops.untrusted import plain, printable

from .frames import Frame
from .index import RunIndex
from .transcript import action_text

HEALTH_STYLE = MappingProxyType(
    {"healthy": "green", "degraded": "yellow", "critical": "red", "down": "bold red"}
)
LATEST = 8
"""Finished episodes the dashboard lists."""


class Rate:
    """Episodes per second over the last ``window_s`` seconds."""

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self._seen: deque[tuple[float, int]] = deque()

    def add(self, count: int, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        self._seen.append((now, count))
        while len(self._seen) > 2 and now - self._seen[0][0] > self.window_s:
            self._seen.popleft()
        first_time, first_count = self._seen[0]
        return (count - first_count) / (now - first_time) if now > first_time else 0.0


def status_line(index: RunIndex) -> str:
    """The run in one plain line: episodes done of planned, resolved so far, in flight."""
    done, planned = len(index.rows), index.planned()
    resolved = sum(row.resolved for row in index.rows)
    share = f"{resolved / done:.0%}" if done else "-"
    return (
        f"{done} of {planned if planned is not None else '?'} episodes done, "
        f"{share} resolved so far, {len(index.in_flight)} in flight"
    )


def run_view(index: RunIndex, rate: float = 0.0) -> Group:
    """The dashboard of a run: counters, turns by role, figures by tier, the
    latest finished episodes and those in flight."""
    roles = index.roles.figures()  # sorts every latency: once a frame
    return Group(_header(index, rate, roles), _roles(roles), _tiers(index), _latest(index))


def _header(index: RunIndex, rate: float, roles: list[Any]) -> Panel:
    planned = index.planned()
    done = len(index.rows)
    share = f" ({done / planned:.0%})" if planned else ""
    state = index.status()
    if state == "stopped":
        state = f"stopped: no process writes it ({index.resume_command()} goes on)"
    text = Text()
    text.append(f"{done} of {planned if planned is not None else '?'} episodes done{share}")
    text.append(f"   in flight {len(index.in_flight)}   {rate:.1f} episodes/s   {state}")
    timeouts = sum(r.timeouts for r in roles)
    errors = sum(r.errors for r in roles)
    text.append(f"\nturns timed out {timeouts}, failed {errors}")
    return Panel(text, title=f"chaosops watch: {index.folder}", expand=False)


def _roles(roles: list[Any]) -> Table:
    table = Table(title="turns by role", title_justify="left")
    for column in ("policy", "role", "played by", "turns", "legal", "unread", "timed out",
                   "errors", "p50 ms", "p99 ms"):  # fmt: skip
        table.add_column(column, justify="left" if column in ("policy", "role", "played by")
                         else "right")  # fmt: skip
    for f in roles:
        played = f.played_by or "-"
        if f.model:
            played += f" ({f.model})"
        legal = "-" if f.legal_share is None else f"{f.legal_share:.0%}"
        table.add_row(plain(f.policy), f.role, plain(played), str(f.turns), legal,
                      str(f.parse_errors), str(f.timeouts), str(f.errors),
                      _ms(f.latency_p50_ms), _ms(f.latency_p99_ms))  # fmt: skip
    return table


def _tiers(index: RunIndex) -> Table:
    table = Table(title="by tier, so far", title_justify="left")
    for column in ("policy", "tier", "episodes", "success", "mean reward"):
        table.add_column(column, justify="left" if column in ("policy", "tier") else "right")
    for (policy, tier), tally in index.tiers.items():
        success = tally.resolved / tally.episodes if tally.episodes else 0.0
        table.add_row(plain(policy), tier, str(tally.episodes), f"{success:.0%}",
                      f"{tally.mean_reward:+.1f}")  # fmt: skip
    return table


def _latest(index: RunIndex) -> Table:
    table = Table(title="latest episodes", title_justify="left")
    for column in ("episode", "scenario", "outcome", "reward", "steps"):
        table.add_column(column, justify="right" if column in ("reward", "steps") else "left")
    for episode in list(index.in_flight.values())[:LATEST]:
        table.add_row(plain(episode.episode_id), plain(_scenario_of(episode.fields)),
                      Text("in flight", style="cyan"), "", str(len(episode.turns)))  # fmt: skip
    for row in index.rows[-LATEST:][::-1]:
        outcome = Text("resolved", style="green") if row.resolved else Text("not resolved")
        if row.status != "ok":
            outcome = Text(row.status, style="red")
        table.add_row(plain(row.episode_id), plain(row.scenario), outcome, f"{row.reward:+.1f}",
                      str(row.steps))  # fmt: skip
    return table


def _scenario_of(fields: dict[str, Any]) -> str:
    return f"{fields.get('failure_type')}/{fields.get('difficulty')}/seed={fields.get('seed')}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def frame_view(frame: Frame, title: str = "") -> Group:
    """One frame of an episode: the services and their health, the alerts, whose
    turn it is, the chat and inbox, the oversight flags, the action taken and
    the reward so far."""
    services = Table(title="services", title_justify="left")
    services.add_column("service")
    services.add_column("health")
    for name, health in frame.services.items():
        services.add_row(name, Text(health, style=HEALTH_STYLE.get(health, "")))
    turn = "episode over" if frame.next_role is None else f"next: {frame.next_role}"
    head = Text(f"step {frame.step}   {turn}   reward so far {frame.total:+.1f}")
    if frame.action is not None:
        taken = printable(action_text(frame.action))  # a message's text is a model's
        head.append(f"\n{frame.role} took: {taken} ({frame.reward:+.1f})")
    flags = ", ".join(frame.flags) or "(none)"
    return Group(
        Panel(head, title=title or "episode", expand=False),
        services,
        _listing("alerts", frame.alerts),
        _listing("chat", frame.chat),
        _listing(f"{frame.role} inbox" if frame.role else "inbox", frame.inbox),
        Text(f"oversight flags: {flags}", style="magenta" if frame.flags else ""),
    )


def _listing(title: str, lines: list[str]) -> Panel:
    # chat and inbox hold what models wrote: shown as text, never as markup
    return Panel(plain("\n".join(lines) or "(none)"), title=title, expand=False,
                 title_align="left")  # fmt: skip


def follow(
    console: Console,
    render: Callable[[], Any],
    done: Callable[[], bool],
    every_s: float = 0.5,
    status: Callable[[], str] | None = None,
    status_every_s: float = 5.0,
) -> None:
    """Show ``render()`` live, again every ``every_s``, until ``done()``. On a
    console that is not a terminal (a pipe, a file, CI), print ``status()`` as
    a plain line every ``status_every_s`` instead, then the last view once."""
    if not console.is_terminal:
        last = -status_every_s
        while not done():
            if status is not None and time.monotonic() - last >= status_every_s:
                console.print(printable(status()), markup=False, highlight=False)
                last = time.monotonic()
            time.sleep(every_s)
        console.print(render())
        return
    with Live(render(), console=console, refresh_per_second=4, transient=False) as live:
        while not done():
            time.sleep(every_s)
            live.update(render())
