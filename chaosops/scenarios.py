"""Scenario suite files: TOML lists of ChaosOps scenarios, validated with pydantic.

Suite file format
-----------------

A suite file is TOML::

    name = "easy"                      # required: the suite's name
    description = "..."                # optional
    difficulty = "easy"                # optional: default tier for the entries

    [[scenarios]]                      # one or more entries
    failure_type = "db_deadlock"       # required: a FailureType value
    difficulty = "easy"                # easy | medium | hard (required unless set above)
    seeds = [0, 31, 62]                # one scenario per seed, in this order ...
    # ... or instead of `seeds`:
    # seed_start = 0                   #   first seed
    # count = 3                        #   number of scenarios (at most 100000)
    # seed_step = 31                   #   optional, default 1 (only with seed_start)
    max_steps = 12                     # optional, 1 to 10000; default: the tier's max (12/18/25)
    inject_misleading_logs = false     # optional, default: difficulty == "hard"

    [scenarios.turn_timeout]           # optional: per-role turn deadline, seconds
    sre = 5.0                          #   finite and > 0
    manager = 2.5

Seeds are integers from 0 to 2**63 - 1 (`MAX_SEED`): a negative seed would give
the very episode of its positive twin (``random.Random`` takes the absolute
value), and the results files hold 64-bit integers. A ``seed_start`` range must
stay within these bounds too. The file is UTF-8 (a leading byte-order mark is
allowed).

A file plans at most 1,000,000 scenarios (`MAX_SUITE_SCENARIOS`) and an entry's
`count` is at most 100,000 (`MAX_ENTRY_COUNT`); both are checked before any
scenario is built, so a typo such as `count = 1000000000000` is one error line,
not a hang.

Each entry expands to one `Scenario` per seed (`Scenario.from_type`, so the rogue
fleet agent follows the failure type), in file order. Unknown keys are errors
(a typo never passes silently); integers must be TOML integers, not strings.

`load_scenarios(path)` reads a file, or every ``*.toml`` of a folder in sorted
name order, into plain `Scenario`s (a ``*.toml`` entry of the folder that is not a
regular file, such as a dangling link, is an error, not skipped, unless hidden,
such as an editor's lock file; sub-folders are not read). `load_suite_entries(path)` gives the same
scenarios as `LoadedScenario`s that also carry the entry's turn timeouts.

A bad file raises `ScenarioFileError` with one line naming the file, the entry
(``scenarios[3]``) and the field, and what is accepted, for example::

    suite.toml: scenarios[3].failure_type: unknown failure type 'db_dedlock'; \
valid: db_deadlock, memory_leak, ...
    suite.toml: invalid TOML at line 7, column 12: Expected '=' after a key ...

`canonical_suite_paths()` returns the three shipped suites (easy, medium, hard),
the scenarios of `scenarios_for_tier(tier, episodes_per_type=5)`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from chaosops._toml import FileProblem, read_toml
from chaosops.curriculum.generator import TIER_MAX_STEPS
from chaosops.env.models import AgentRole, DifficultyTier, FailureType
from chaosops.env.world_sim import Scenario

__all__ = [
    "LoadedScenario",
    "ScenarioChoice",
    "ScenarioFileError",
    "Suite",
    "canonical_suite_paths",
    "choose_scenario",
    "folder_suite_files",
    "load_scenarios",
    "load_suite",
    "load_suite_entries",
    "read_suite",
]

CANONICAL_TIERS = ("easy", "medium", "hard")
MAX_ENTRY_COUNT = 100_000
"""The largest ``count`` of a suite entry (and of ``--episodes-per-type``)."""
MAX_SUITE_SCENARIOS = 1_000_000
"""The most scenarios one suite file (and one run's plan) may hold."""
MAX_SEED = 2**63 - 1
"""The largest seed; seeds are from 0 (the results files hold 64-bit integers)."""
MAX_MAX_STEPS = 10_000
"""The largest ``max_steps`` of a suite entry."""
_VALID_FAILURES = ", ".join(f.value for f in FailureType)
_VALID_TIERS = ", ".join(t.value for t in DifficultyTier)
_VALID_ROLES = ", ".join(r.value for r in AgentRole)


class ScenarioFileError(FileProblem):
    """A suite file could not be read; the message is one line naming file, entry and field."""


def _finite_positive(value: float) -> float:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"expected a finite number of seconds > 0, got {value!r}")
    return value


PositiveSeconds = Annotated[StrictFloat | StrictInt, AfterValidator(_finite_positive)]
Seed = Annotated[StrictInt, Field(ge=0, le=MAX_SEED)]


def _check_failure(value: str) -> str:
    if value not in FailureType._value2member_map_:
        raise ValueError(f"unknown failure type {value!r}; valid: {_VALID_FAILURES}")
    return value


def _check_tier(value: str | None) -> str | None:
    if value is not None and value not in DifficultyTier._value2member_map_:
        raise ValueError(f"unknown difficulty {value!r}; valid: {_VALID_TIERS}")
    return value


class _EntryModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    failure_type: StrictStr
    difficulty: StrictStr | None = None
    seeds: list[Seed] | None = None
    seed_start: Seed | None = None
    count: Annotated[StrictInt, Field(ge=1, le=MAX_ENTRY_COUNT)] | None = None
    seed_step: StrictInt = 1
    max_steps: Annotated[StrictInt, Field(ge=1, le=MAX_MAX_STEPS)] | None = None
    inject_misleading_logs: StrictBool | None = None
    turn_timeout: dict[StrictStr, PositiveSeconds] | None = None

    _known_failure = field_validator("failure_type")(_check_failure)
    _known_tier = field_validator("difficulty")(_check_tier)

    @field_validator("turn_timeout")
    @classmethod
    def _known_roles(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        for role in value or {}:
            if role not in AgentRole._value2member_map_:
                raise ValueError(f"unknown role {role!r}; valid: {_VALID_ROLES}")
        return value

    @model_validator(mode="after")
    def _one_seed_form(self) -> _EntryModel:
        ranged = self.seed_start is not None or self.count is not None
        if self.seeds is not None and ranged:
            raise _seed_error("seeds", "give either seeds = [...] or seed_start + count, not both")
        if self.seeds is None and not ranged:
            raise _seed_error("seeds", "missing; give seeds = [...] or seed_start + count")
        if self.seeds is None and (self.seed_start is None or self.count is None):
            absent = "seed_start" if self.seed_start is None else "count"
            raise _seed_error(absent, "missing; seed_start and count go together, give both")
        if self.seeds is not None and not self.seeds:
            raise _seed_error("seeds", "empty; give at least one seed")
        if self.seeds is not None and "seed_step" in self.model_fields_set:
            raise _seed_error(
                "seed_step", "seed_step goes with seed_start + count, not with seeds = [...]"
            )
        if self.seeds is None:
            assert self.seed_start is not None and self.count is not None
            last = self.seed_start + self.seed_step * (self.count - 1)
            if not 0 <= last <= MAX_SEED:
                raise _seed_error(
                    "seed_step" if last < 0 else "count",
                    f"seed_start + seed_step * (count - 1) = {last} is out of range; "
                    f"seeds are integers from 0 to {MAX_SEED}",
                )
        return self

    def seed_list(self) -> list[int]:
        if self.seeds is not None:
            return list(self.seeds)
        assert self.seed_start is not None and self.count is not None
        return [self.seed_start + self.seed_step * k for k in range(self.count)]


def _seed_error(field_name: str, message: str) -> PydanticCustomError:
    # An entry-level check of the seed fields, reported at the field it names.
    # (the message holds no "{name}": pydantic fills those from the context)
    return PydanticCustomError("seed_form", message, {"field": field_name})


class _SuiteModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[StrictStr, Field(min_length=1)]
    description: StrictStr = ""
    difficulty: StrictStr | None = None
    scenarios: Annotated[list[_EntryModel], Field(min_length=1)]

    _known_tier = field_validator("difficulty")(_check_tier)


@dataclass(frozen=True)
class LoadedScenario:
    """One scenario of a suite file, with its entry's per-role turn timeouts."""

    scenario: Scenario
    turn_timeout: Mapping[AgentRole, float] | None = None
    suite: str = ""
    source: str = ""
    entry: int = 0


@dataclass(frozen=True)
class Suite:
    """A parsed suite file."""

    name: str
    description: str
    path: Path
    entries: list[LoadedScenario] = field(default_factory=list)

    @property
    def scenarios(self) -> list[Scenario]:
        """The plain scenarios, in file order."""
        return [e.scenario for e in self.entries]


_FIELD_HINTS = MappingProxyType(
    {
        "name": 'a non-empty string, e.g. name = "my-suite"',
        "description": "a string",
        "scenarios": "one or more [[scenarios]] tables",
        "failure_type": f"one of: {_VALID_FAILURES}",
        "difficulty": f"one of: {_VALID_TIERS}",
        "seeds": f"a list of integers from 0 to {MAX_SEED}, e.g. seeds = [0, 31, 62]",
        "seed_start": f"an integer from 0 to {MAX_SEED}",
        "seed": f"an integer from 0 to {MAX_SEED}",
        "count": f"an integer from 1 to {MAX_ENTRY_COUNT}",
        "seed_step": "an integer",
        "max_steps": f"an integer from 1 to {MAX_MAX_STEPS}",
        "inject_misleading_logs": "true or false",
        "turn_timeout": f"a table role -> seconds (finite, > 0); roles: {_VALID_ROLES}",
    }
)


_TOP_FIELDS = ("name", "description", "difficulty", "scenarios")
_ENTRY_FIELDS = (
    "failure_type",
    "difficulty",
    "seeds",
    "seed_start",
    "count",
    "seed_step",
    "max_steps",
    "inject_misleading_logs",
    "turn_timeout",
)


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(key: str) -> str:
    """``key`` as a TOML key: bare, or quoted with what does not print escaped
    (a quoted key may hold a line break; the message stays one line)."""
    if _BARE_KEY.fullmatch(key):
        return key
    quoted = json.dumps(key, ensure_ascii=False)  # "café" as written, not "caf\u00e9"
    return "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in quoted)


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            key = _toml_key(str(part))
            out += f".{key}" if out else key
    return out


def _describe_error(err: Any) -> tuple[str, str]:  # one of pydantic's ErrorDetails
    """(where, problem) of a pydantic error, in suite-file terms."""
    loc = tuple(err["loc"])
    if "turn_timeout" in loc:
        # Up to the role: what follows is pydantic's name of the type it
        # tried (``float``), not a field of the file.
        loc = loc[: loc.index("turn_timeout") + 2]
    where = _where(loc)
    kind = err["type"]
    field_name = next((p for p in reversed(loc) if isinstance(p, str)), "")
    if len(loc) >= 2 and loc[-2] == "turn_timeout":
        field_name = "turn_timeout"
    if kind == "missing":
        return where, f"missing; expected {_FIELD_HINTS.get(field_name, 'a value')}"
    if kind == "extra_forbidden":
        accepted = _ENTRY_FIELDS if len(loc) > 1 else _TOP_FIELDS
        return where, f"unknown field; accepted: {', '.join(accepted)}"
    if kind == "seed_form":  # an entry-level check, at the seed field it names
        return f"{where}.{err['ctx']['field']}", str(err["msg"])
    if kind == "value_error":
        return where, str(err["msg"]).removeprefix("Value error, ")
    hint = _FIELD_HINTS.get(field_name)
    got = err.get("input")
    got_text = "" if isinstance(got, dict | list) else f" (got {got!r})"
    message = "Input should be a table" if kind in ("model_type", "dict_type") else err["msg"]
    return where, f"{message}{got_text}" + (f"; expected {hint}" if hint else "")


class ScenarioChoice(BaseModel):
    """One scenario named by type, tier and seed, as a reset takes it (the
    server's, the tool environment's, the AEC environment's), with a suite
    entry's bounds; ``max_steps`` None is the tier's (12, 18, 25), as in the
    canonical suites, so a scenario is the same episode at every entry point."""

    model_config = ConfigDict(extra="forbid")

    failure_type: StrictStr
    difficulty: StrictStr = "easy"
    seed: Seed = 0
    max_steps: Annotated[StrictInt, Field(ge=1, le=MAX_MAX_STEPS)] | None = None

    _known_failure = field_validator("failure_type")(_check_failure)
    _known_tier = field_validator("difficulty")(_check_tier)

    def scenario(self) -> Scenario:
        tier = DifficultyTier(self.difficulty)
        return Scenario.from_type(
            FailureType(self.failure_type), seed=self.seed, difficulty=tier,
            max_steps=self.max_steps or TIER_MAX_STEPS[tier],
        )  # fmt: skip


def choose_scenario(**fields: Any) -> Scenario:
    """The :class:`ScenarioChoice` of ``fields``; a ValueError of one line
    naming the field, the value and what is accepted."""
    try:
        return ScenarioChoice.model_validate(fields).scenario()
    except ValidationError as exc:
        error = exc.errors()[0]
        if error["type"] == "extra_forbidden":
            accepted = ", ".join(ScenarioChoice.model_fields)
            where = _where(error["loc"])
            raise ValueError(f"{where}: unknown field; accepted: {accepted}") from None
        where, problem = _describe_error(error)
        raise ValueError(f"{where}: {problem}") from None


def read_suite(path: str | Path) -> Suite:
    """Parse and validate one suite file."""
    path = Path(path)
    data = read_toml(path, "suite file", ScenarioFileError)
    try:
        model = _SuiteModel.model_validate(data)
    except ValidationError as exc:
        where, problem = _describe_error(exc.errors()[0])
        raise ScenarioFileError(path, where, problem) from None
    total = sum(len(e.seeds) if e.seeds is not None else e.count or 0 for e in model.scenarios)
    if total > MAX_SUITE_SCENARIOS:
        raise ScenarioFileError(
            path,
            "scenarios",
            f"{total} scenarios in all; a suite file holds at most {MAX_SUITE_SCENARIOS} "
            "(split it, or lower the counts)",
        )
    entries = [
        loaded
        for index, entry in enumerate(model.scenarios)
        for loaded in _entry_scenarios(path, model, index, entry)
    ]
    return Suite(name=model.name, description=model.description, path=path, entries=entries)


def _entry_scenarios(
    path: Path, suite: _SuiteModel, index: int, entry: _EntryModel
) -> list[LoadedScenario]:
    """The scenarios of one ``[[scenarios]]`` entry, a seed each."""
    tier_value = entry.difficulty or suite.difficulty
    if tier_value is None:
        raise ScenarioFileError(
            path,
            f"scenarios[{index}].difficulty",
            f"missing; expected one of: {_VALID_TIERS} (or a top-level difficulty)",
        )
    tier = DifficultyTier(tier_value)
    max_steps = entry.max_steps if entry.max_steps is not None else TIER_MAX_STEPS[tier]
    timeouts = (
        {AgentRole(role): float(sec) for role, sec in entry.turn_timeout.items()}
        if entry.turn_timeout
        else None
    )
    loaded = []
    for seed in entry.seed_list():
        scenario = Scenario.from_type(
            FailureType(entry.failure_type), seed=seed, difficulty=tier, max_steps=max_steps
        )
        if entry.inject_misleading_logs is not None:
            scenario = dataclasses.replace(
                scenario, inject_misleading_logs=entry.inject_misleading_logs
            )
        loaded.append(
            LoadedScenario(
                scenario=scenario,
                turn_timeout=timeouts,
                suite=suite.name,
                source=str(path),
                entry=index,
            )
        )
    return loaded


def load_suite(path: str | Path) -> list[Scenario]:
    """The scenarios of one suite file, in file order."""
    return read_suite(path).scenarios


def folder_suite_files(folder: str | Path) -> list[Path]:
    """The ``*.toml`` suite files of ``folder``, sorted by name (not recursive).

    Sub-folders named ``*.toml`` are left out, and so are hidden entries that
    are not regular files (an editor's lock file, such as Emacs' dangling link
    ``.#easy.toml``); any other ``*.toml`` entry that is not a regular file (a
    dangling link, a pipe) raises :class:`ScenarioFileError` rather than being
    skipped unseen, and so does a folder without suite files.
    """
    folder = Path(folder)
    files = sorted(
        p
        for p in folder.glob("*.toml")
        if not p.is_dir() and (p.is_file() or not p.name.startswith("."))
    )
    for file in files:
        if not file.is_file():
            dangling = file.is_symlink() and not file.exists()
            what = "a link to a missing file" if dangling else "not a regular file"
            raise ScenarioFileError(file, "", f"{what}; a suite folder holds .toml suite files")
    if not files:
        raise ScenarioFileError(folder, "", "folder holds no *.toml suite files")
    return files


def _suite_files(path: Path) -> list[Path]:
    return folder_suite_files(path) if path.is_dir() else [path]


def load_suite_entries(path_or_folder: str | Path) -> list[LoadedScenario]:
    """Scenarios with their turn timeouts, from a suite file or a folder of them."""
    out: list[LoadedScenario] = []
    for file in _suite_files(Path(path_or_folder)):
        out.extend(read_suite(file).entries)
    return out


def load_scenarios(path_or_folder: str | Path) -> list[Scenario]:
    """Plain scenarios from a suite file, or every ``*.toml`` of a folder (sorted by name)."""
    return [e.scenario for e in load_suite_entries(path_or_folder)]


def canonical_suite_paths() -> list[Path]:
    """The three shipped suites (easy, medium, hard), the package data
    ``chaosops/suites`` (the repository's ``scenarios/`` links to it)."""
    packaged = Path(str(resources.files("chaosops") / "suites"))
    paths = [packaged / f"{tier}.toml" for tier in CANONICAL_TIERS]
    if not all(p.is_file() for p in paths):
        raise FileNotFoundError(
            f"canonical suites not found in {packaged}; reinstall the chaosops package"
        )
    return paths
