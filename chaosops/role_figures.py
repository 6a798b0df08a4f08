"""Per-role turn figures of a run: who played, turns, timeouts, errors, tokens, latency.

Computed from result records (``results.jsonl``): each step's ``role``,
``timed_out``, ``error``, ``parse_error``, ``latency_ms`` and ``tokens``, and
the record's ``roles`` (the role's policy, model and answer format). A turn is
*legal* when the policy's own move was applied as given: not timed out, no
error, and an answer that read as a legal move (no ``parse_error``). Latency
percentiles are over every turn played, a timed-out one counting its time to
the deadline.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rich import box
from rich.table import Table

from chaosops.outputs import ResultLine
from chaosops.stats import percentile
from chaosops.untrusted import plain

__all__ = ["RoleFigures", "RoleTallies", "render_role_table", "role_figures"]

ROLE_ORDER = ("sre", "oversight", "dev", "manager")


@dataclass(frozen=True, slots=True)
class RoleFigures:
    """One role's turns under one run's policy (the records' ``policy``)."""

    policy: str
    role: str
    played_by: str | None
    model: str | None
    turns: int
    timeouts: int
    errors: int
    parse_errors: int
    legal: int
    tokens: int | None  # None: no turn recorded a token count
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    answer: str | None = None  # an LLM's answer format

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def legal_share(self) -> float | None:
        """The share of turns whose own move was applied as given (None: no turn)."""
        return self.legal / self.turns if self.turns else None


@dataclass
class _Tally:
    played_by: str | None = None
    model: str | None = None
    answer: str | None = None
    turns: int = 0
    timeouts: int = 0
    errors: int = 0
    parse_errors: int = 0
    legal: int = 0
    tokens: int | None = None
    latencies: array[float] = field(default_factory=lambda: array("d"))

    def add(self, step: Mapping[str, Any]) -> None:
        self.turns += 1
        timed_out, error = bool(step.get("timed_out")), bool(step.get("error"))
        unread = bool(step.get("parse_error")) and not (timed_out or error)
        self.timeouts += timed_out
        self.errors += error and not timed_out
        self.parse_errors += unread
        self.legal += not (timed_out or error or unread)
        if isinstance(tokens := step.get("tokens"), int):
            self.tokens = (self.tokens or 0) + tokens
        if isinstance(latency := step.get("latency_ms"), int | float):
            self.latencies.append(float(latency))


class RoleTallies:
    """The per-role figures as records come in (:meth:`add`), for a caller that
    reads the records once for several figures; :meth:`figures` at the end."""

    def __init__(self) -> None:
        self._tallies: dict[tuple[str, str], _Tally] = {}

    def add(self, record: ResultLine) -> None:
        policy = str(record.get("policy") or "?")
        players = record.get("roles") or {}
        for step in record.get("steps") or ():
            role = str(step.get("role"))
            tally = self._tallies.get((policy, role))
            if tally is None:
                player = players.get(role) or {}
                tally = _Tally(player.get("policy"), player.get("model"), player.get("answer"))
                self._tallies[(policy, role)] = tally
            tally.add(step)

    def figures(self) -> list[RoleFigures]:
        """One :class:`RoleFigures` per (policy, role), policies in order of first
        appearance, roles in turn order."""
        tallies = self._tallies
        policies = list(dict.fromkeys(policy for policy, _ in tallies))
        order = {role: i for i, role in enumerate(ROLE_ORDER)}
        keys = sorted(tallies, key=lambda k: (policies.index(k[0]), order.get(k[1], 99), k[1]))
        return [_figures(policy, role, tallies[(policy, role)]) for policy, role in keys]


def role_figures(records: Iterable[ResultLine]) -> list[RoleFigures]:
    """One :class:`RoleFigures` per (policy, role) of ``records`` (see :class:`RoleTallies`)."""
    tallies = RoleTallies()
    for record in records:
        tallies.add(record)
    return tallies.figures()


def _figures(policy: str, role: str, tally: _Tally) -> RoleFigures:
    latencies = sorted(tally.latencies)
    return RoleFigures(
        policy=policy,
        role=role,
        played_by=tally.played_by,
        model=tally.model,
        turns=tally.turns,
        timeouts=tally.timeouts,
        errors=tally.errors,
        parse_errors=tally.parse_errors,
        legal=tally.legal,
        tokens=tally.tokens,
        latency_p50_ms=percentile(latencies, 50),
        latency_p99_ms=percentile(latencies, 99),
        answer=tally.answer,
    )


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if value >= 10 else f"{value:.2f}"


def render_role_table(figures: Sequence[RoleFigures], *, title: str | None = None) -> Table:
    """The figures as a rich table that fits 80 columns (names wrap, numbers never)."""
    several = len({f.policy for f in figures}) > 1
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=0)
    if several:
        table.add_column("run", overflow="fold")
    table.add_column("role", no_wrap=True)
    table.add_column("played by", overflow="fold")
    for header in ("turns", "legal", "un-\nread", "timed\nout", "errors", "tokens", "p50\nms",
                   "p99\nms"):  # fmt: skip
        table.add_column(header, justify="right", no_wrap=True)
    for f in figures:
        who = f.played_by or "-"
        if f.model:
            about = f.model if not f.answer else f"{f.model}, {f.answer}"
            who = f"{who} ({about})" if f.model != who else who
        legal = "-" if f.legal_share is None else f"{f.legal_share:.0%}"
        cells: list[Any] = [f.role, plain(who), str(f.turns), legal, str(f.parse_errors),
                            str(f.timeouts), str(f.errors)]  # fmt: skip
        cells += ["-" if f.tokens is None else str(f.tokens), _ms(f.latency_p50_ms)]
        cells.append(_ms(f.latency_p99_ms))
        table.add_row(*([plain(f.policy)] if several else []), *cells)
    return table
