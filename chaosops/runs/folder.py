"""A run folder (:class:`RunFolder`) and what it records: its run.json (the
spec, compared by ``--resume``), its summary, and the checks before anything
is written there."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

from chaosops import __version__
from chaosops._urls import shown_url
from chaosops.agents.llm.render import build_messages
from chaosops.outputs import (
    RESULTS_FILE,
    RUN_RECORD,
    OutputError,
    ResultLine,
    ResultsReader,
    RunOutputs,
    atomic_write_bytes,
    scenario_fields,
)
from chaosops.summary import Summary
from chaosops.summary import summarise as summary_of

from .errors import OUT, RESUME, Message, Named, RunError, output_error
from .kinds import KINDS, ModelKind
from .options import RECORDED, SERVED, Option, own_settings, recorded_values
from .plan import Plan, PlanKeys
from .spec import RunSpec


def summarise(
    records: Iterable[ResultLine], planned: Sequence[str], spec: RunSpec | None = None
) -> Summary:
    """The summary of ``records`` (see :func:`chaosops.summary.summarise`), with
    what played under ``spec``."""
    if spec is None:
        return summary_of(records, planned)
    return summary_of(records, planned, samples=spec.samples, played=played(spec))


def build_summary(
    records: Iterable[ResultLine], planned: Sequence[str], spec: RunSpec | None = None
) -> dict[str, Any]:
    """The content of ``summary.json``: totals, the evaluation rows (with 95%
    intervals), each role's turn figures and, with ``spec``, what played
    (each role's policy and model, each LLM's settings without the key).

    Derived from the results records only, so a resumed run ends with the same
    summary as an uninterrupted one (the turn latencies aside).
    """
    return summarise(records, planned, spec).data


def played(spec: RunSpec) -> dict[str, Any]:
    """What played, as summary.json and eval.json say it."""
    return {
        "players": spec.players,
        **{kind.recorded: models or None for kind, models in _recorded_models(spec)},
    }


def _recorded_models(spec: RunSpec) -> list[tuple[ModelKind, dict[str, Any]]]:
    """Each kind and its models in play, as the records hold them (by policy name)."""
    return [
        (kind, {name: kind.record(s) for name, s in spec.in_play(kind.settings).items()})
        for kind in KINDS
    ]


def refuse_existing(path: Path, advice: str | Message, *, folder: Path | None = None) -> None:
    """Refuse (:class:`RunError`, exit 2) to write over ``path`` when it holds
    something: ``chaosops run`` and ``chaosops eval`` never overwrite an earlier
    output. ``folder`` is the output folder the file was put in by default (the
    message then names the folder); ``advice`` says what to do instead."""
    try:
        if path.stat().st_size == 0:
            return
    except OSError:  # absent, or not reachable: whoever writes it reports that
        return
    where = f"output folder {folder} already holds {path.name}" if folder else f"{path} exists"
    raise RunError(where, "; ", advice, code=2)


def plan_digest(plan: Plan) -> str:
    """A fingerprint of the plan's groups of episodes (order aside): each
    group's scenario, deadlines and seeds."""

    entries = sorted(
        orjson.dumps(
            [
                {**scenario_fields(group.template.scenario), "seed": None},
                sorted(
                    (str(getattr(k, "value", k)), v)
                    for k, v in (group.template.suite_timeout or {}).items()
                ),
                [group.seeds.start, group.seeds.stop, group.seeds.step],
            ]
        )
        for group in plan.groups
    )
    return hashlib.sha256(b"\n".join(entries)).hexdigest()[:16]


def _recorded_type(option: Option) -> Any:
    """What run.json holds of ``option``: its run-file type, or none (null)."""
    if option.dest == "max_policy_errors":  # a count, or the share "P%" was read to
        return int | float | None
    kind = option.file_field()[0]
    return kind | None


def _record_fields() -> dict[str, Any]:
    fields: dict[str, Any] = {
        str(o.recorded): (_recorded_type(o), Field(default=None)) for o in RECORDED
    }
    fields.update(
        planned=(int | None, Field(default=None, ge=0)),  # required of a run's folder
        plan=(str | None, Field(default=None, min_length=1)),
        served=(bool, Field(default=False)),  # a folder of chaosops serve: no plan
        scenarios=(list[dict[str, Any]] | None, Field(default=None)),  # a run from Python
        **{
            kind.recorded: (dict[str, dict[str, Any]] | None, Field(default=None)) for kind in KINDS
        },
        config_file=(str | None, Field(default=None)),
        version=(str | None, Field(default=None)),
    )
    return fields


# run.json's schema, made from the options' table as the run file's model is
class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a field no run writes: an edited record

    @model_validator(mode="after")
    def _planned_unless_served(self) -> Any:
        served, planned, plan = (getattr(self, name) for name in ("served", "planned", "plan"))
        if not served and (planned is None or plan is None):
            raise ValueError("a run's record holds its plan (planned and plan)")
        return self


RunRecord: Any = create_model(
    "RunRecord",
    __base__=_Record,
    __doc__="A run record (run.json): the spec of the run played in its folder.",
    **_record_fields(),
)


def run_record(spec: RunSpec, planned: Plan) -> dict[str, Any]:
    """The content of ``run.json``: ``spec`` as its schema holds it, with the
    plan's size and fingerprint (never an LLM's key)."""
    options = recorded_values(spec)
    options.update(planned=len(planned), plan=plan_digest(planned))
    if spec.scenarios:  # a run from Python: no suite file holds them
        options["scenarios"] = list(spec.scenarios)
    return _with_models(options, spec)


def served_record(spec: RunSpec) -> dict[str, Any]:
    """The run.json of a folder ``chaosops serve`` writes: who plays the roles
    its clients leave, their deadlines and models; no plan (the clients
    choose the scenarios), and ``served``, which ``--resume`` refuses."""
    shared = {option.recorded for option in RECORDED if option.dest in SERVED}
    options = {k: v for k, v in recorded_values(spec).items() if k in shared}
    return _with_models({**options, "served": True}, spec)


def _with_models(options: dict[str, Any], spec: RunSpec) -> dict[str, Any]:
    options.update({kind.recorded: models for kind, models in _recorded_models(spec) if models})
    options.update(config_file=spec.config_file, version=__version__)
    return options


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_shown(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(map(_shown, value)) or "none"
    return str(value)


def _suites_shown(options: Mapping[str, Any]) -> str:
    return " ".join(options.get("paths") or []) or "the canonical suites"


# (run.json field, setting named in the message); compared in this order. The
# suites are compared by what they plan.
_MUST_MATCH = tuple(
    ("plan" if option.recorded == "paths" else option.recorded, Named(option.dest))
    for option in RECORDED
    if option.must_match
)


def check_resume(
    out: Path, options: Mapping[str, Any], keys: PlanKeys, label: str
) -> dict[str, Any] | None:
    """Refuse (:class:`RunError`, exit 2) to resume the run in ``out`` with other
    options than it was started with; nothing is written. Returns the recorded
    options (``None`` for a folder without ``run.json``).

    A folder without ``run.json`` (written before it existed) is checked against
    its results: their policy, and every recorded episode in the given plan.
    """
    recorded = read_run_record(out / RUN_RECORD)
    if recorded is not None:
        if recorded.get("served"):
            raise _served(out)
        _check_options(out, recorded, options)
    if (out / RESULTS_FILE).exists():
        _check_results(out, options, keys, label, recorded is not None)
    return recorded


def check_loaded_models(out: Path, recorded: Mapping[str, Any], options: Mapping[str, Any]) -> None:
    """Refuse (exit 2) to resume with models other than the run's, now that
    they are loaded (a checkpoint's weights are hashed as it loads)."""
    given = orjson.loads(orjson.dumps(options))
    for kind in KINDS:
        if (differs := _model_difference(recorded, given, kind)) is not None:
            raise _refuse(out, *differs)


def _served(out: Path) -> RunError:
    return RunError(
        RESUME,
        f": {out} was written by chaosops serve, whose episodes are played by "
        "its clients: chaosops run cannot resume it (chaosops view shows it)",
    )


def _refuse(out: Path, option: str | Named | Message, recorded: str, given: str) -> RunError:
    return RunError(
        RESUME,
        ": ",
        option,
        f" differs from the run in {out}: recorded {recorded}, "
        f"given {given}; give the options of that run, or a new ",
        OUT,
        " folder",
    )


def read_run_record(path: Path) -> dict[str, Any] | None:
    """The options ``run.json`` recorded; None when there is no such file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RunError(f"cannot read {path}: {exc.strerror or exc}", code=1) from None
    try:
        recorded = orjson.loads(data)
    except orjson.JSONDecodeError:
        recorded = None
    if not isinstance(recorded, dict):
        raise RunError(
            f"{path} is not a chaosops run record (expected the JSON object of the "
            "run's options); resume with a folder written by chaosops run"
        )
    try:
        RunRecord.model_validate(recorded)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = error["loc"] or ("plan",)  # the record's own check: a run's holds its plan
        option = next((o for o in RECORDED if o.recorded == loc[0]), None)
        said = error["msg"] if option is None or option.kind is None else option.expected
        if error["type"] == "extra_forbidden":
            said = "no field of a run record"
        got = error.get("input") if error["loc"] else None
        raise RunError(
            f"{path}: {'.'.join(map(str, loc))}: {said} (got {got!r:.60}); the run record was "
            "edited or damaged: resume a folder as chaosops run wrote it"
        ) from None
    return recorded


def _check_options(out: Path, recorded: dict[str, Any], options: Mapping[str, Any]) -> None:
    """Every option a resume must match, as recorded and as given now."""
    given = orjson.loads(orjson.dumps(options))  # as read back from run.json
    for name, option in _MUST_MATCH:
        if name not in recorded or name not in given or recorded[name] == given[name]:
            continue
        if name == "plan":
            before, now = _suites_shown(recorded), _suites_shown(given)
            edited = " as it reads now" if before == now else ""  # same paths
            raise _refuse(
                out,
                option,
                f"{before} ({recorded.get('planned')} episodes)",
                f"{now}{edited} ({given['planned']} episodes)",
            )
        raise _refuse(out, option, _shown(recorded[name]), _shown(given[name]))
    for kind in KINDS:
        if (differs := _model_difference(recorded, given, kind)) is not None:
            raise _refuse(out, *differs)


def _check_results(
    out: Path, options: Mapping[str, Any], keys: PlanKeys, label: str, recorded: bool
) -> None:
    """The recorded episodes: played by ``label`` (what the records call the
    policy), and each one in the plan. ``recorded``: the options matched
    run.json already, so a difference is between run.json and the results."""
    policies: set[str] = set()
    stray, strays = None, 0  # the first record not in the plan, and how many
    try:
        for record in ResultsReader(out / RESULTS_FILE):  # a line at a time
            policies.add(str(record.get("policy")))
            if keys.position(record["run_key"]) is None:
                stray, strays = stray or record["run_key"], strays + 1
    except OutputError as exc:
        raise output_error(exc) from None
    if "served" in policies:  # chaosops.serve.runs.SERVED, which imports the serve extra
        raise _served(out)
    if policies and sorted(policies) != [label] and recorded:
        raise RunError(
            RESUME,
            f": {out / RESULTS_FILE} holds episodes of {', '.join(sorted(policies))}, "
            f"but {out / RUN_RECORD} records {label}: the folder was edited; resume a folder "
            "as chaosops run wrote it, or start a new ",
            OUT,
            " folder",
        )
    if policies and sorted(policies) != [label]:
        raise _refuse(out, Named("policy"), ", ".join(sorted(policies)), label)
    if stray is not None:
        plan = Message("the plan (", Named("paths"), ", ", Named("episodes_per_type"), ", ",
                       Named("seed_offset"), ")")  # fmt: skip
        raise _refuse(
            out,
            plan,
            f"episode {stray}" + (f" and {strays - 1} more" if strays > 1 else ""),
            f"a plan without it ({len(keys)} episodes of {_suites_shown(options)})",
        )


def _model_difference(
    recorded: Mapping[str, Any], given: Mapping[str, Any], kind: ModelKind
) -> tuple[Named | str | Message, str, str] | None:
    """The first setting a resumed run must match (:attr:`ModelKind.decides`)
    of a model of ``kind`` in play that differs: (option, recorded, given);
    other weights under the same path are other weights (``weights``: their
    files' hash, set by no flag of its own, and known once the model is
    loaded: unknown yet, it is compared by :func:`check_loaded_models`)."""
    before, now = recorded.get(kind.recorded) or {}, given.get(kind.recorded) or {}
    named = {field: Named(dest) for field, dest in own_settings(kind.name)}
    for name in sorted(set(before) & set(now)):
        for field in kind.decides:
            old, new = before[name].get(field), now[name].get(field)
            if field == "weights" and new is None:
                continue  # not loaded yet
            if old != new and field == "base_url":  # never a password in a message
                old, new = (None if u is None else shown_url(u) for u in (old, new))
            if old == new:
                continue
            where: Named | str | Message = named.get(field, named["model"])
            if name != kind.name:
                where = f"the run file's {kind.name}.{name}.{field}"
            if field == "weights":
                where = Message(where, "'s weights (their files' hash)")
            return where, _shown(old), _shown(new)
    return None


def renderer() -> Callable[[Any, Any], Any]:
    """What scripted turns' prompts are rendered with: the LLM policy's own prompt."""
    return build_messages


class RunFolder(RunOutputs):
    """A run folder and every file in it: the results and trajectories
    (crash-safe, see :class:`~chaosops.outputs.RunOutputs`), summary.json,
    and run.json, the record of the spec played there, which ``--resume``
    compares. ``chaosops run``, ``eval``, ``serve`` and :func:`run_to_folder`
    all write their folders through one."""

    wrote_record = False  # run.json, by this process (a resumed run keeps its own)

    @property
    def record_path(self) -> Path:
        """Its run.json."""
        return self.out_dir / RUN_RECORD

    @property
    def files(self) -> list[Path]:
        """The files it holds (which a log must not be)."""
        return [self.results_path, self.trajectories_path, self.summary_path, self.record_path]

    def holds_a_run(self) -> bool:
        """Whether a run was begun here (a run.json, or results)."""
        return self.record_path.is_file() or self.results_path.is_file()

    def refuse_a_run(self, advice: str | Message) -> None:
        """Refuse (exit 2) a folder that holds a run; ``advice`` says what to do instead."""
        for path in (self.results_path, self.trajectories_path, self.record_path):
            refuse_existing(path, advice, folder=self.out_dir)

    def check_resume(self, record: Mapping[str, Any], label: str) -> dict[str, Any] | None:
        """Refuse (exit 2) to resume the run here with another record than its
        own (see :func:`check_resume`); returns the recorded one."""
        return check_resume(self.out_dir, record, self.keys, label)

    def check_models(self, recorded: Mapping[str, Any], record: Mapping[str, Any]) -> None:
        """Refuse (exit 2) to resume with other loaded models (see :func:`check_loaded_models`)."""
        check_loaded_models(self.out_dir, recorded, record)

    def read_record(self) -> dict[str, Any] | None:
        """Its run.json, checked against :data:`RunRecord` (None: it has none)."""
        return read_run_record(self.record_path)

    def write_record(self, record: Mapping[str, Any]) -> None:
        """run.json, whole (atomically), once checked against :data:`RunRecord`."""
        RunRecord.model_validate(record)  # what is written is what is read back
        data = orjson.dumps(record, option=orjson.OPT_INDENT_2)
        atomic_write_bytes(self.record_path, data + b"\n")
        self.wrote_record = True
