"""What to run: suite files, planned episodes and their turn deadlines."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._config import Deadlines, RunConfig, TurnTimeout
from ._errors import CLIError, one_line


@dataclasses.dataclass(frozen=True)
class PlannedEpisode:
    """One episode to run: its scenario and the turn deadline that applies to it."""

    scenario: Any
    suite_timeout: Mapping[Any, float] | None = None


def _tier_pools() -> dict[str, list[str]]:
    from chaosops.curriculum.generator import TIER_POOLS

    return {tier.value: [ft.value for ft in pool] for tier, pool in TIER_POOLS.items()}


def suite_files(paths: Sequence[str]) -> list[Path]:
    """The suite files named by ``paths`` (folders give their ``*.toml``, sorted);
    the canonical suites when ``paths`` is empty."""
    from chaosops.scenarios import ScenarioFileError, canonical_suite_paths, folder_suite_files

    if not paths:
        return [Path(p) for p in canonical_suite_paths()]
    files: list[Path] = []
    for text in paths:
        path = Path(text)
        if not text or not path.exists():
            # an empty argument (an unset shell variable) is not the current folder
            raise CLIError(
                f"no such scenario file or folder: {text if text.strip() else repr(text)} "
                "(expected a .toml suite file or a folder of them)"
            )
        if path.is_dir():
            try:
                found = folder_suite_files(path)
            except ScenarioFileError as exc:  # no suite file, or an entry not a file
                raise CLIError(one_line(exc)) from None
            files.extend(found)
        else:
            files.append(path)
    return files


def _too_many(count: int, what: str) -> CLIError:
    from chaosops.scenarios import MAX_SUITE_SCENARIOS

    return CLIError(
        f"{what} plan {count} episodes; a run plans at most {MAX_SUITE_SCENARIOS} "
        "(lower --episodes-per-type, or run the suites in several runs)"
    )


def load_suites(paths: Sequence[str]) -> list[Any]:
    """The suites named on the command line (default: the canonical ones).

    Raises :class:`CLIError` with the loader's one-line message on a bad file,
    and when the suites together plan more than ``MAX_SUITE_SCENARIOS``
    episodes (each file is bounded by the loader, before it builds anything).
    """
    from chaosops.scenarios import MAX_SUITE_SCENARIOS, ScenarioFileError, read_suite

    suites = []
    total = 0
    for path in suite_files(paths):
        try:
            suite = read_suite(path)
        except ScenarioFileError as exc:
            raise CLIError(one_line(exc)) from None
        except OSError as exc:
            raise CLIError(f"cannot read scenario file {path}: {exc.strerror or exc}") from None
        total += len(suite.entries)
        if total > MAX_SUITE_SCENARIOS:
            raise _too_many(total, f"the suites up to {path}")
        suites.append(suite)
    return suites


def expand_episodes_per_type(
    planned: Sequence[PlannedEpisode], episodes_per_type: int, seed_offset: int = 0
) -> list[PlannedEpisode]:
    """Replace the suites' seeds with ``episodes_per_type`` seeds per entry.

    An entry is a (failure type, tier) pair, in order of first appearance; its
    first scenario is the template (max steps, misleading logs, rogue agent,
    turn timeouts). Seeds follow ``scenarios_for_tier``: ``seed_offset + 97*i +
    31*r`` where ``i`` is the failure's position in the tier's pool (failures
    outside the pool come after it, in order of appearance), so on the
    canonical suites this gives exactly ``scenarios_for_tier(tier,
    seed_offset=..., episodes_per_type=N)`` per tier.
    """
    from chaosops.scenarios import MAX_SUITE_SCENARIOS

    pools = _tier_pools()
    templates: dict[tuple[str, str], PlannedEpisode] = {}
    for item in planned:
        key = (item.scenario.failure_type.value, item.scenario.difficulty.value)
        templates.setdefault(key, item)
    total = len(templates) * episodes_per_type
    if total > MAX_SUITE_SCENARIOS:
        raise _too_many(
            total,
            f"{len(templates)} (failure type, tier) entries x --episodes-per-type "
            f"{episodes_per_type}",
        )
    extra: dict[str, list[str]] = {}
    out = []
    for (failure, tier), template in templates.items():
        pool = pools.get(tier, [])
        if failure in pool:
            i = pool.index(failure)
        else:
            others = extra.setdefault(tier, [])
            others.append(failure)
            i = len(pool) + others.index(failure)
        for r in range(episodes_per_type):
            scenario = dataclasses.replace(template.scenario, seed=seed_offset + 97 * i + 31 * r)
            out.append(PlannedEpisode(scenario, template.suite_timeout))
    _check_seeds(out, seed_offset)
    return out


def plan_episodes(config: RunConfig) -> list[PlannedEpisode]:
    """The episodes of a ``run`` or ``eval`` invocation, in suite order, with
    ``--episodes-per-type`` and ``--seed-offset`` applied, then ``--tier``,
    ``--failure-type`` and ``--limit``."""
    return _subset(_seeded(config), config)


def _subset(planned: list[PlannedEpisode], config: RunConfig) -> list[PlannedEpisode]:
    """The planned episodes ``--tier``, ``--failure-type`` and ``--limit`` keep;
    refuses (exit 2) a selection that keeps none."""
    kept = [
        p
        for p in planned
        if (not config.tiers or str(p.scenario.difficulty) in config.tiers)
        and (not config.failure_types or str(p.scenario.failure_type) in config.failure_types)
    ]
    if planned and not kept:
        chosen = [f"--tier {t}" for t in config.tiers]
        chosen += [f"--failure-type {f}" for f in config.failure_types]
        raise CLIError(
            f"no scenario of the suites matches {' '.join(chosen)}; "
            "`chaosops scenarios` lists what they hold"
        )
    return kept[: config.limit] if config.limit is not None else kept


def _seeded(config: RunConfig) -> list[PlannedEpisode]:
    planned = [
        PlannedEpisode(entry.scenario, entry.turn_timeout)
        for suite in load_suites(config.paths)
        for entry in suite.entries
    ]
    if config.episodes_per_type is not None:
        return expand_episodes_per_type(planned, config.episodes_per_type, config.seed_offset)
    if config.seed_offset:
        planned = [
            PlannedEpisode(
                dataclasses.replace(p.scenario, seed=p.scenario.seed + config.seed_offset),
                p.suite_timeout,
            )
            for p in planned
        ]
        _check_seeds(planned, config.seed_offset)
    return planned


def _check_seeds(planned: Sequence[PlannedEpisode], seed_offset: int) -> None:
    """Refuse (exit 2) a ``--seed-offset`` that puts a seed outside 0..MAX_SEED,
    the range of a suite file's seeds."""
    from chaosops.scenarios import MAX_SEED

    for item in planned:
        if not 0 <= item.scenario.seed <= MAX_SEED:
            raise CLIError(
                f"--seed-offset {seed_offset} gives seed {item.scenario.seed} "
                f"({item.scenario.failure_type.value}, {item.scenario.difficulty.value}); "
                f"seeds are integers from 0 to {MAX_SEED}"
            )


def effective_timeout(
    deadlines: Deadlines, suite_timeout: Mapping[Any, float] | None
) -> TurnTimeout:
    """The deadline of one episode (see :meth:`Deadlines.for_suite`)."""
    return deadlines.for_suite(suite_timeout)


def timeout_groups(
    deadlines: Deadlines, planned: Sequence[PlannedEpisode]
) -> list[tuple[list[int], TurnTimeout]]:
    """Indices of ``planned`` grouped by deadline, in order of first appearance.

    The runner takes one deadline per batch, so each group runs as its own
    batch, one after the other (with the canonical suites there is one group).
    """
    groups: dict[Any, tuple[list[int], TurnTimeout]] = {}
    for index, item in enumerate(planned):
        timeout = deadlines.for_suite(item.suite_timeout)
        key = (
            tuple(sorted((getattr(k, "value", k), v) for k, v in timeout.items()))
            if isinstance(timeout, dict)
            else timeout
        )
        groups.setdefault(key, ([], timeout))[0].append(index)
    return list(groups.values())
