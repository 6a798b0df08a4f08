"""What to run: suite files, planned episodes and their turn deadlines."""

from __future__ import annotations

import dataclasses
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate
from pathlib import Path
from typing import Any

from chaosops.curriculum.generator import TIER_POOLS
from chaosops.outputs import parse_run_key, run_key, scenario_from_record
from chaosops.samples import Sample
from chaosops.scenarios import (
    MAX_SEED,
    MAX_SUITE_SCENARIOS,
    ScenarioFileError,
    canonical_suite_paths,
    folder_suite_files,
    read_suite,
)

from .errors import Message, Named, RunError, joined, one_line
from .spec import Deadlines, RunSpec, TurnTimeout


@dataclasses.dataclass(frozen=True)
class PlannedEpisode:
    """One episode to run: its scenario and the turn deadline that applies to it."""

    scenario: Any
    suite_timeout: Mapping[Any, float] | None = None


def _tier_pools() -> dict[str, list[str]]:

    return {tier.value: [ft.value for ft in pool] for tier, pool in TIER_POOLS.items()}


def suite_files(paths: Sequence[str]) -> list[Path]:
    """The suite files named by ``paths`` (folders give their ``*.toml``, sorted);
    the canonical suites when ``paths`` is empty."""

    if not paths:
        return [Path(p) for p in canonical_suite_paths()]
    files: list[Path] = []
    for text in paths:
        path = Path(text)
        if not text or not path.exists():
            # an empty argument (an unset shell variable) is not the current folder
            raise RunError(
                f"no such scenario file or folder: {text if text.strip() else repr(text)} "
                "(expected a .toml suite file or a folder of them)"
            )
        if path.is_dir():
            try:
                found = folder_suite_files(path)
            except ScenarioFileError as exc:  # no suite file, or an entry not a file
                raise RunError(one_line(exc)) from None
            files.extend(found)
        else:
            files.append(path)
    return files


def _too_many(count: int, what: str | Message) -> RunError:

    return RunError(
        what,
        f" plan {count} episodes; a run plans at most {MAX_SUITE_SCENARIOS} (lower ",
        Named("episodes_per_type"),
        ", or run the suites in several runs)",
    )


def load_suites(paths: Sequence[str]) -> list[Any]:
    """The suites named on the command line (default: the canonical ones).

    Raises :class:`RunError` with the loader's one-line message on a bad file,
    and when the suites together plan more than ``MAX_SUITE_SCENARIOS``
    episodes (each file is bounded by the loader, before it builds anything).
    """

    suites = []
    total = 0
    for path in suite_files(paths):
        try:
            suite = read_suite(path)
        except ScenarioFileError as exc:
            raise RunError(one_line(exc)) from None
        except OSError as exc:
            raise RunError(f"cannot read scenario file {path}: {exc.strerror or exc}") from None
        total += len(suite.entries)
        if total > MAX_SUITE_SCENARIOS:
            raise _too_many(total, f"the suites up to {path}")
        suites.append(suite)
    return suites


@dataclasses.dataclass(frozen=True)
class _Group:
    """Planned episodes that differ by their seed only: a suite entry, or an
    entry's seeds under ``--episodes-per-type``."""

    template: PlannedEpisode
    seeds: range

    @property
    def ident(self) -> tuple[str, str, int]:
        scenario = self.template.scenario
        return scenario.failure_type.value, scenario.difficulty.value, scenario.max_steps


class Plan(Sequence[PlannedEpisode]):
    """The planned episodes of a run, in order, each made when asked: memory
    grows with the suites' entries, not with the episodes they plan."""

    def __init__(self, groups: Sequence[_Group], samples: int = 1) -> None:
        self.samples = samples  # each scenario's repeats: its groups stand that often
        self.groups = [group for group in groups if len(group.seeds)]
        self._starts = list(accumulate((len(g.seeds) for g in self.groups), initial=0))
        # which groups may hold a run key's episode: by (failure, tier, max
        # steps, seed) for a suite entry, by (failure, tier, max steps) for seeds
        self._holders: dict[tuple[Any, ...], list[int]] = {}
        for number, group in enumerate(self.groups):
            ident = group.ident + ((group.seeds[0],) if len(group.seeds) == 1 else ())
            self._holders.setdefault(ident, []).append(number)

    @classmethod
    def listing(cls, planned: Iterable[PlannedEpisode]) -> Plan:
        """The plan of these episodes, one group each."""
        return cls([_Group(p, range(p.scenario.seed, p.scenario.seed + 1)) for p in planned])

    def __len__(self) -> int:
        return self._starts[-1]

    def __getitem__(self, index: Any) -> Any:
        number, seed = self._locate(index)
        group = self.groups[number]
        scenario = group.template.scenario
        if seed != scenario.seed:
            scenario = dataclasses.replace(scenario, seed=seed)
        return PlannedEpisode(scenario, group.template.suite_timeout)

    def _locate(self, index: int) -> tuple[int, int]:
        """The group number and the seed of the episode at ``index``."""
        if not isinstance(index, int):
            raise TypeError(f"plan indices are integers, not {index!r:.40}")
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"plan index {index} out of range ({len(self)} episodes)")
        number = bisect_right(self._starts, index) - 1
        return number, self.groups[number].seeds[index - self._starts[number]]

    def spans(self) -> list[tuple[_Group, range]]:
        """Each group with the plan indices of its episodes."""
        return [
            (group, range(self._starts[n], self._starts[n + 1]))
            for n, group in enumerate(self.groups)
        ]

    def _candidates(self, ident: tuple[str, str, int], seed: int) -> list[int]:
        """The groups holding an episode of ``ident`` and ``seed``, in plan order."""
        single = self._holders.get((*ident, seed), [])
        ranged = [n for n in self._holders.get(ident, []) if seed in self.groups[n].seeds]
        return sorted(single + ranged) if single and ranged else single or ranged

    def occurrence(self, index: int) -> int:
        """How many earlier episodes of the plan have this one's run key fields."""
        number, seed = self._locate(index)
        return self._candidates(self.groups[number].ident, seed).index(number)

    def position(self, ident: tuple[str, str, int], seed: int, occurrence: int) -> int | None:
        """The plan index of the ``occurrence``-th episode of ``ident`` and ``seed``."""
        found = self._candidates(ident, seed)
        if not 0 <= occurrence < len(found):
            return None
        number = found[occurrence]
        return self._starts[number] + self.groups[number].seeds.index(seed)

    def keys(self, label: str) -> PlanKeys:
        """The run keys of this plan's episodes, played as ``label``."""
        return PlanKeys(self, label)


class PlanKeys(Sequence[str]):
    """A plan's run keys (:func:`chaosops.outputs.run_key`), each made when
    asked, and the position of a key in the plan."""

    def __init__(self, plan: Plan, label: str) -> None:
        self.plan = plan
        self.label = label

    def __len__(self) -> int:
        return len(self.plan)

    def __getitem__(self, index: Any) -> Any:

        return run_key(self.label, self.plan[index].scenario, self.plan.occurrence(index))

    def position(self, key: str) -> int | None:
        """The plan index of ``key``, None when it names no planned episode."""

        parsed = parse_run_key(key)
        if parsed is None or parsed[0] != self.label:
            return None
        _, (failure, tier, seed, max_steps), occurrence = parsed
        return self.plan.position((failure, tier, max_steps), seed, occurrence)


class PlanSlice(Sequence[Any]):
    """The scenarios at some plan indices, made as each is asked for (a runner
    batch)."""

    def __init__(self, plan: Plan, indices: Sequence[int]) -> None:
        self.plan = plan
        self.indices = indices

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, index: Any) -> Any:
        number = self.indices[index]
        scenario = self.plan[number].scenario
        if self.plan.samples == 1:
            return scenario

        return Sample.of(scenario, self.plan.occurrence(number))


def expand_episodes_per_type(planned: Plan, episodes_per_type: int, seed_offset: int = 0) -> Plan:
    """Replace the suites' seeds with ``episodes_per_type`` seeds per entry.

    An entry is a (failure type, tier) pair, in order of first appearance; its
    first scenario is the template (max steps, misleading logs, rogue agent,
    turn timeouts). Seeds follow ``scenarios_for_tier``: ``seed_offset + 97*i +
    31*r`` where ``i`` is the failure's position in the tier's pool (failures
    outside the pool come after it, in order of appearance), so on the
    canonical suites this gives exactly ``scenarios_for_tier(tier,
    seed_offset=..., episodes_per_type=N)`` per tier.
    """

    pools = _tier_pools()
    templates: dict[tuple[str, str], PlannedEpisode] = {}
    for group in planned.groups:
        scenario = group.template.scenario
        templates.setdefault(
            (scenario.failure_type.value, scenario.difficulty.value), group.template
        )
    total = len(templates) * episodes_per_type
    if total > MAX_SUITE_SCENARIOS:
        raise _too_many(
            total,
            Message(
                f"{len(templates)} (failure type, tier) entries x ",
                Named("episodes_per_type", episodes_per_type),
            ),
        )
    extra: dict[str, list[str]] = {}
    groups = []
    for (failure, tier), template in templates.items():
        pool = pools.get(tier, [])
        if failure in pool:
            i = pool.index(failure)
        else:
            others = extra.setdefault(tier, [])
            others.append(failure)
            i = len(pool) + others.index(failure)
        first = seed_offset + 97 * i
        groups.append(_Group(template, range(first, first + 31 * episodes_per_type, 31)))
    plan = Plan(groups)
    _check_seeds(plan, seed_offset)
    return plan


def plan_episodes(spec: RunSpec) -> Plan:
    """The episodes of a ``run`` or ``eval`` invocation, in suite order, with
    ``--episodes-per-type`` and ``--seed-offset`` applied, then ``--tier``,
    ``--failure-type`` and ``--limit``, then ``--samples`` (each group of
    scenarios that often, one after the other: a run key's ``#N`` is the sample)."""
    plan = _subset(_seeded(spec), spec)
    if spec.samples == 1:
        return plan
    return Plan([group for group in plan.groups for _ in range(spec.samples)], spec.samples)


def _subset(planned: Plan, spec: RunSpec) -> Plan:
    """The planned episodes ``--tier``, ``--failure-type`` and ``--limit`` keep;
    refuses (exit 2) a selection that keeps none."""
    kept = [
        group
        for group in planned.groups
        if (not spec.tiers or str(group.template.scenario.difficulty) in spec.tiers)
        and (
            not spec.failure_types
            or str(group.template.scenario.failure_type) in spec.failure_types
        )
    ]
    if planned.groups and not kept:
        chosen = [Named("tier", t) for t in spec.tiers]
        chosen += [Named("failure_type", f) for f in spec.failure_types]
        raise RunError(
            "no scenario of the suites matches ",
            joined(chosen, " "),
            "; `chaosops scenarios` lists what they hold",
        )
    if spec.limit is None:
        return Plan(kept)
    cut, room = [], spec.limit
    for group in kept:
        cut.append(_Group(group.template, group.seeds[:room]))
        room -= len(cut[-1].seeds)
    return Plan(cut)


def _seeded(spec: RunSpec) -> Plan:
    if spec.scenarios:  # a run from Python, resumed
        return _listed(spec.scenarios)
    plan = Plan.listing(
        PlannedEpisode(entry.scenario, entry.turn_timeout)
        for suite in load_suites(spec.paths)
        for entry in suite.entries
    )
    if spec.episodes_per_type is not None:
        return expand_episodes_per_type(plan, spec.episodes_per_type, spec.seed_offset)
    if spec.seed_offset:
        offset = spec.seed_offset
        plan = Plan([_Group(g.template, range(g.seeds[0] + offset, g.seeds[0] + offset + 1))
                     for g in plan.groups])  # fmt: skip
        _check_seeds(plan, offset)
    return plan


def _listed(scenarios: Sequence[Any]) -> Plan:
    """The plan of the scenarios a run from Python recorded (its run.json's
    ``scenarios``); refuses (exit 2) a list that is not of scenarios."""

    try:
        return Plan.listing(PlannedEpisode(scenario_from_record(s)) for s in scenarios)
    except (KeyError, TypeError, ValueError) as exc:
        raise RunError(f"run.json: scenarios: not a list of scenarios ({one_line(exc)})") from None


def _check_seeds(plan: Plan, seed_offset: int) -> None:
    """Refuse (exit 2) a ``--seed-offset`` that puts a seed outside 0..MAX_SEED,
    the range of a suite file's seeds."""

    for group in plan.groups:
        outside = [seed for seed in (group.seeds[0], group.seeds[-1]) if not 0 <= seed <= MAX_SEED]
        if outside:
            scenario = group.template.scenario
            raise RunError(
                Named("seed_offset", seed_offset),
                f" gives seed {outside[0]} "
                f"({scenario.failure_type.value}, {scenario.difficulty.value}); "
                f"seeds are integers from 0 to {MAX_SEED}",
            )


def effective_timeout(
    deadlines: Deadlines, suite_timeout: Mapping[Any, float] | None
) -> TurnTimeout:
    """The deadline of one episode (see :meth:`Deadlines.for_suite`)."""
    return deadlines.for_suite(suite_timeout)


def timeout_groups(deadlines: Deadlines, plan: Plan) -> list[tuple[list[range], TurnTimeout]]:
    """The plan's indices grouped by deadline (as spans of consecutive
    indices), in order of first appearance.

    The runner takes one deadline per batch, so each group runs as its own
    batch, one after the other (with the canonical suites there is one group).
    """
    groups: dict[Any, tuple[list[range], TurnTimeout]] = {}
    for group, span in plan.spans():
        timeout = deadlines.for_suite(group.template.suite_timeout)
        key = (
            tuple(sorted((getattr(k, "value", k), v) for k, v in timeout.items()))
            if isinstance(timeout, dict)
            else timeout
        )
        groups.setdefault(key, ([], timeout))[0].append(span)
    return list(groups.values())
