"""``chaosops scenarios``: list the suites and validate every file."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rich.table import Table

from chaosops.evaluation import TIER_ORDER
from chaosops.runs.plan import suite_files
from chaosops.scenarios import ScenarioFileError, read_suite

from ._errors import PROG, one_line
from ._terminal import console_for


def cmd_scenarios(paths: Sequence[str]) -> int:
    """``chaosops scenarios``; returns the exit code (2 when a file is invalid)."""
    table = Table(title="scenario suites", title_justify="left")
    for header in ("suite", "file", "scenarios", "failure types", "tiers"):
        table.add_column(header, justify="right" if header == "scenarios" else "left")
    total = valid = 0
    problems: list[str] = []
    for path in suite_files(paths):
        try:
            suite = read_suite(path)
        except ScenarioFileError as exc:
            problems.append(one_line(exc))
            continue
        except OSError as exc:
            problems.append(f"cannot read scenario file {path}: {exc.strerror or exc}")
            continue
        scenarios = suite.scenarios
        valid += 1
        total += len(scenarios)
        failures = dict.fromkeys(s.failure_type.value for s in scenarios)
        tiers = sorted(
            {s.difficulty.value for s in scenarios},
            key=lambda t: (TIER_ORDER.index(t) if t in TIER_ORDER else len(TIER_ORDER), t),
        )
        table.add_row(
            suite.name, str(path), str(len(scenarios)), ", ".join(failures), ", ".join(tiers)
        )
    console = console_for(sys.stdout)
    if valid:
        console.print(table)
    if problems:
        for problem in problems:
            sys.stderr.write(f"{PROG}: error: {problem}\n")
        return 2
    console.print(f"{valid} suite(s), {total} scenarios, all valid")
    return 0
