"""The options of a run, each declared once.

Each :class:`Option` says what it is for (its help, in which other options
are named by their field in braces: ``{resume}``), its
value's type and bounds (``value``, a pydantic annotation: the flag and a run
file's key are both validated by it, strictly), its default, which key of a
run file sets it, whether the run record (``run.json``) records it, and
whether ``--resume`` takes it back or refuses a different value. A model
setting's type, bounds and default are its kind's settings' field's. The
parser, the run-file models, the run record and the resume checks are all
read off :data:`OPTIONS`. ``chaosops eval`` shares the options of every
group but ``run``.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import GenericAlias, MappingProxyType
from typing import Any

from pydantic import Field

from chaosops.agents.llm.settings import ANSWERS

from . import values as v
from .kinds import KIND_NAMES, kind_named
from .spec import RunSpec

ABSENT = object()
"""What a record function returns for an option that the run record leaves out."""


@dataclass(frozen=True, slots=True)
class Option:
    """One option: the command line's, the run file's and the run record's view of it.

    ``dest`` is its field; the command line makes its flag of it
    (``--seed-offset``), or takes it as the positional suites (``positional``).

    ``value`` is the annotation a value is validated as (None: any text);
    ``parse`` reads a flag's text before that (default: a number as Python
    reads one). A repeatable option's run-file key holds a list of values, or
    with ``by_role`` a table role -> value (``ROLE=VALUE`` on the command
    line). ``sets`` marks a setting of a model kind's tables: ``("llm",
    "temperature")`` is the ``temperature`` of ``[llm.NAME]`` entries (its
    type, bounds and default: the kind's settings' field), ``[llm.llm]``
    being the flags' own LLM. ``recorded`` is the run record's field and ``record``
    reads it off the run's spec; ``restore`` turns it back into the
    flag's value on ``--resume`` (None: not restored), and ``must_match``
    makes ``--resume`` refuse a run given another value.
    """

    dest: str
    help: str
    group: str
    value: Any = None
    parse: Callable[[str], Any] | None = None
    default: Any = None
    default_env: str | None = None  # an environment variable read before the default
    metavar: str | None = None
    repeatable: bool = False
    by_role: bool = False
    switch: bool = False
    file_key: str | None = None
    sets: tuple[str, str] | None = None  # (model kind, its settings' field)
    recorded: str | None = None
    record: Callable[[Any], Any] | None = None
    restore: Callable[[Any], Any] | None = None
    must_match: bool = False
    serve_help: str | None = None  # chaosops serve's own words, where run's do not fit
    positional: bool = False  # the command line's arguments, not a flag

    @property
    def setting(self) -> _Setting | None:
        """The model setting this option sets (see :attr:`sets`), or None."""
        if self.sets is None:
            return None
        kind, name = self.sets
        return _settings_field(kind_named(kind).settings, name)

    def table_key(self, table: str | None) -> str | None:
        """Its key at a run file's top level (``table`` None), or in a model
        kind's ``[TABLE.NAME]`` tables."""
        if table is None:
            return self.file_key
        return self.sets[1] if self.sets is not None and self.sets[0] == table else None

    @property
    def kind(self) -> Any:
        """The annotation one value is validated as (a model setting's: its field's)."""
        return self.value if self.setting is None else self.setting.annotation

    @property
    def initial(self) -> Any:
        """The default (a model setting's: its field's)."""
        if self.setting is not None and self.default is None:
            default = self.setting.default
            return None if default is dataclasses.MISSING else default  # required: unset
        return self.default

    @property
    def unset(self) -> Any:
        """The attribute's value when the option is not given."""
        return [] if self.repeatable else False if self.switch else self.initial

    @property
    def expected(self) -> str:
        """What a value must be, in the flags' and the files' words."""
        return f"expected {v.describe(self.kind)}"

    def file_field(self) -> tuple[Any, Any]:
        """The run-file key's type and default, as pydantic reads them."""
        if self.setting is not None:  # as the settings take it: model is required
            default = self.setting.default
            required = default is dataclasses.MISSING
            return (self.kind, Field() if required else Field(default=default))
        kind = str if self.kind is None else self.kind
        if self.switch:
            return (bool | None, Field(default=None))
        if self.by_role:  # the alias made at run time, as dict[Role, kind] would be
            return (GenericAlias(dict, (v.Role, kind)), Field(default={}))
        if self.repeatable or self.positional:
            return (GenericAlias(list, (kind,)) | None, Field(default=None))
        return (kind | None, Field(default=None))


@dataclass(frozen=True, slots=True)
class _Setting:
    annotation: Any
    default: Any


@functools.cache  # read for each option of each parser: the hints are evaluated once a field
def _settings_field(settings: type, name: str) -> _Setting:
    """A model setting: its annotation (bounds included) and default."""
    field = next(f for f in dataclasses.fields(settings) if f.name == name)
    hints = typing.get_type_hints(settings, include_extras=True)
    return _Setting(hints[name], field.default)


def _run_default(name: str) -> Any:
    """A run setting's default, as :class:`RunSpec` declares it."""
    return next(f for f in dataclasses.fields(RunSpec) if f.name == name).default


def _items(value: Any) -> list[Any]:
    return list((value or {}).items())


def _listed(value: Any) -> list[Any]:
    return list(value or [])


def _same(value: Any) -> Any:
    return value


def _own(kind: str, name: str) -> Callable[[Any], Any]:
    """A setting of the flags' own model of ``kind``, recorded when a role plays it."""

    def record(spec: RunSpec) -> Any:
        settings = spec.model_settings(kind)
        if kind not in spec.policy_by_role.values() or settings is None:
            return ABSENT
        return getattr(settings, name)

    return record


_WHO = "who plays"
_PLAN = "what to play"
_PACING = "how it is played"
_WATCH = "how it is watched"
_LLM = "LLM policy (the llm policy of {policy} or {policies})"
_HF = "local model policy (the hf policy of {policy} or {policies})"
_RUN = "run"
_MODELS = "model policies (any kind)"

OPTIONS: tuple[Option, ...] = (
    Option(
        "policy",
        group=_WHO,
        default="heuristic",
        help="policy playing the four roles (default heuristic): random, heuristic, oracle, "
        "llm, an LLM named in the run file, or module:attribute",
        file_key="policy",
        recorded="policy",
        record=lambda c: c.policy,
        restore=str,
        must_match=True,
    ),
    Option(
        "name",
        group=_WHO,
        value=v.Name,
        help="what the outputs call this run's players (their 'policy'; default: the "
        "policies, e.g. heuristic+dev=oracle)",
        file_key="name",
        recorded="name",
        record=lambda c: c.name,
        restore=_same,
        must_match=True,
    ),
    Option(
        "role_policy",
        group=_WHO,
        value=v.PolicyName,
        repeatable=True,
        by_role=True,
        metavar="ROLE=POLICY",
        help="the policy of one role over {policy} (repeatable): a scripted name, llm, an "
        "LLM named in the run file, or module:attribute, a policy (observation, role) or a "
        "factory (scenario -> role map)",
        file_key="roles",
        recorded="role_policies",
        record=lambda c: dict(c.role_policies) or None,
        restore=_items,
        must_match=True,
    ),
    Option(
        "episodes_per_type",
        group=_PLAN,
        value=v.EpisodesPerType,
        metavar="N",
        help="replace the suites' seeds: N seeds per (failure type, tier) entry, seed = seed "
        "offset + 97*i + 31*r as in scenarios_for_tier "
        f"(1 to {v.MAX_EPISODES_PER_TYPE})",
        file_key="episodes_per_type",
        recorded="episodes_per_type",
        record=lambda c: c.episodes_per_type,
        restore=_same,
        must_match=True,
    ),
    Option(
        "seed_offset",
        group=_PLAN,
        value=int,
        default=_run_default("seed_offset"),
        metavar="N",
        help="added to every seed (default 0); the seeds it gives must stay within 0 to 2^63-1",
        file_key="seed_offset",
        recorded="seed_offset",
        record=lambda c: c.seed_offset,
        restore=int,
        must_match=True,
    ),
    Option(
        "tier",
        group=_PLAN,
        value=v.Tier,
        metavar="{" + ",".join(v.TIERS) + "}",
        repeatable=True,
        help="only the scenarios of this tier (repeatable)",
        file_key="tiers",
        recorded="tiers",
        record=lambda c: list(c.tiers) or None,
        restore=_listed,
        must_match=True,
    ),
    Option(
        "failure_type",
        group=_PLAN,
        value=v.FailureName,
        repeatable=True,
        metavar="TYPE",
        help="only the scenarios of this failure type (repeatable), e.g. db_deadlock",
        file_key="failure_types",
        recorded="failure_types",
        record=lambda c: list(c.failure_types) or None,
        restore=_listed,
        must_match=True,
    ),
    Option(
        "limit",
        group=_PLAN,
        value=v.PositiveInt,
        metavar="N",
        help="only the first N scenarios of the plan, after {tier} and {failure_type}",
        file_key="limit",
        recorded="limit",
        record=lambda c: c.limit,
        restore=_same,
        must_match=True,
    ),
    Option(
        "samples",
        group=_PLAN,
        value=v.Samples,
        metavar="K",
        help="play each scenario K times (1 to 1000; default 1), the scripted policies "
        "seeded anew each time; the table and summary.json then give pass@1 and pass@K",
        file_key="samples",
        recorded="samples",
        record=lambda c: c.samples,
        restore=_same,
        must_match=True,
    ),
    Option(
        "paths",
        group=_PLAN,
        positional=True,
        metavar="PATH",
        help="scenario suite files (.toml) or folders of them; default: the canonical "
        "easy, medium and hard suites",
        file_key="paths",
        recorded="paths",
        record=lambda c: [str(p) for p in c.paths],
        restore=list,
        must_match=True,
    ),
    Option(
        "concurrency",
        group=_PACING,
        value=v.PositiveInt,
        default=_run_default("concurrency"),
        metavar="N",
        help="episodes in flight at once (>= 1, default 64; with {ray}, in all the workers)",
        file_key="concurrency",
        recorded="concurrency",
        record=lambda c: c.concurrency,
        restore=_same,  # not given again: as the run began; given: free to change
    ),
    Option(
        "ray",
        group=_PACING,
        metavar="ADDRESS",
        help="run the episodes on Ray worker actors: 'local' (an instance for this run, on "
        "127.0.0.1), 'auto' or HOST:PORT (a running cluster); needs the 'ray' extra",
    ),
    Option(
        "workers",
        group=_PACING,
        value=v.PositiveInt,
        metavar="N",
        help="Ray worker actors (default: one per CPU of the cluster); with {ray}",
    ),
    Option(
        "turn_timeout",
        group=_PACING,
        value=v.Seconds,
        metavar="SECONDS",
        help="deadline of every turn (default: none; suites may set per-role ones)",
        file_key="turn_timeout",
        recorded="turn_timeout",
        record=lambda c: c.deadlines.turn_timeout,
        restore=_same,
        must_match=True,
    ),
    Option(
        "role_timeout",
        group=_PACING,
        value=v.Seconds,
        repeatable=True,
        by_role=True,
        metavar="ROLE=SECONDS",
        help="deadline of one role's turns (repeatable), e.g. {role_timeout} dev=2.5",
        file_key="role_timeout",
        recorded="role_timeout",
        record=lambda c: c.deadlines.per_role,
        restore=_items,
        must_match=True,
    ),
    Option(
        "max_policy_errors",
        group=_PACING,
        value=v.ErrorLimit,
        parse=str,
        metavar="N|P%",
        help="stop the run (exit 1, finished episodes kept for {resume}) once N turns in a "
        "row failed with a policy error, any policy's, or once P%% of the turns did (judged "
        "from the 100th turn on); default: never",
        file_key="max_policy_errors",
        recorded="max_policy_errors",
        record=lambda c: c.max_policy_errors,
        restore=_same,  # not given again: as the run began; given: free to change
    ),
    Option(
        "log_json",
        group=_WATCH,
        metavar="PATH",
        help="write structured JSON logs to PATH ('-' for stdout, the table then going to "
        "stderr; 'off' for none). Default for run: OUT/log.jsonl",
        serve_help="write structured JSON logs to PATH ('-' for stdout; 'off' for none). "
        "Default: OUT/log.jsonl",
    ),
    Option(
        "metrics_port",
        group=_WATCH,
        value=v.Port,
        metavar="PORT",
        help="serve Prometheus metrics on http://HOST:PORT/metrics while the command runs "
        "(0: a free port; the address is printed)",
    ),
    Option(
        "metrics_host",
        group=_WATCH,
        metavar="HOST",
        help="address the metrics are served on (default 127.0.0.1; 0.0.0.0: every interface)",
    ),
    Option(
        "metrics_linger",
        group=_WATCH,
        value=v.NonNegative,
        metavar="SECONDS",
        help="keep serving the final metrics this long after the run (for a last scrape)",
    ),
    Option(
        "otlp_endpoint",
        group=_WATCH,
        metavar="URL",
        help="send OpenTelemetry traces (a span per episode and per turn) over OTLP/HTTP to "
        "URL, e.g. http://127.0.0.1:4318 (needs the otel extra; OTEL_EXPORTER_OTLP_HEADERS "
        "and OTEL_SERVICE_NAME are honoured)",
    ),
    Option("no_progress", group=_WATCH, switch=True, help="no progress bar"),
    Option(
        "llm_base_url",
        group=_LLM,
        default="http://127.0.0.1:8000/v1",
        default_env="OPENAI_BASE_URL",
        metavar="URL",
        help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL or "
        "http://127.0.0.1:8000/v1, the mock-llm default)",
        sets=("llm", "base_url"),
    ),
    Option(
        "llm_model",
        group=_LLM,
        default="chaosops-mock",
        metavar="NAME",
        help="model name (default chaosops-mock, the mock-llm's)",
        sets=("llm", "model"),
        recorded="llm_model",
        record=_own("llm", "model"),
        restore=str,
        must_match=True,
    ),
    Option(
        "llm_api_key",
        group=_LLM,
        metavar="KEY",
        help="API key (default $OPENAI_API_KEY); never printed or written",
    ),
    Option(
        "llm_max_in_flight",
        group=_LLM,
        metavar="N",
        help="requests in flight at once, across all episodes (1 to 100000, default 64)",
        sets=("llm", "max_in_flight"),
    ),
    Option(
        "llm_max_answer_bytes",
        group=_LLM,
        metavar="N",
        help="bytes read of one answer at most (default 1 MiB): a longer one is not read "
        "further, and the turn plays the fallback with the error",
        sets=("llm", "max_answer_bytes"),
    ),
    Option(
        "llm_max_failures",
        group=_MODELS,
        value=v.NonNegativeInt,
        default=_run_default("llm_max_failures"),
        metavar="N",
        help="stop the run (exit 1, finished episodes kept for {resume}) once N calls of one "
        "model in a row failed for good (an LLM's requests, retries spent: the endpoint went "
        "away; a local model's generate calls); default 10; 0: never stop, every such turn "
        "plays the fallback",
        serve_help="not used by serve: a server keeps serving, and a turn whose model call "
        "failed for good plays the fallback",
        file_key="llm_max_failures",
        recorded="llm_max_failures",
        record=lambda c: c.llm_max_failures,
        restore=_same,  # not given again: as the run began; given: free to change
    ),
    Option(
        "temperature",
        group=_LLM,
        help="sampling temperature (0 to 2)",
        sets=("llm", "temperature"),
        recorded="temperature",
        record=_own("llm", "temperature"),
        restore=float,
        must_match=True,
    ),
    Option(
        "top_p",
        group=_LLM,
        metavar="P",
        help="nucleus sampling (a share in (0, 1])",
        sets=("llm", "top_p"),
    ),
    Option(
        "llm_seed",
        group=_LLM,
        metavar="N",
        help="sampling seed sent to the server",
        sets=("llm", "seed"),
    ),
    Option(
        "llm_answer",
        group=_LLM,
        metavar="{" + ",".join(ANSWERS) + "}",
        help="how the model answers, each format but text constrained to the turn's legal "
        "moves: auto (default: the first of the next four the server accepts, probed at the "
        "start), json (response_format json_schema; OpenAI, vLLM, Ollama), json_object "
        "(response_format json_object with the schema; llama-cpp-python), tools (the "
        "take_action tool, named), text (parsed tolerantly)",
        sets=("llm", "answer"),
    ),
    Option(
        "llm_system_prompt",
        group=_LLM,
        metavar="{system,user}",
        help="where the role prompt goes: a system message (default), or folded into the "
        "first user message (user: for models whose chat template has no system role)",
        sets=("llm", "system_prompt"),
    ),
    Option(
        "llm_retries",
        group=_LLM,
        metavar="N",
        help="retries of a failed call within the turn's deadline (default 4)",
        sets=("llm", "retries"),
    ),
    Option(
        "llm_history",
        group=_LLM,
        metavar="N",
        help="send each LLM role its own last N turns of the episode (what it saw and "
        "answered) as earlier messages (default 0: none)",
        sets=("llm", "history"),
    ),
    Option(
        "max_tokens",
        group=_LLM,
        metavar="N",
        help="completion limit",
        sets=("llm", "max_tokens"),
        recorded="max_tokens",
        record=_own("llm", "max_tokens"),
        restore=int,
        must_match=True,
    ),
    Option(
        "llm_logprobs",
        group=_LLM,
        switch=True,
        help="ask for the logprobs of the completion's tokens; trajectories.jsonl then "
        "records logprobs and tokens (or token_ids) per LLM turn",
        sets=("llm", "logprobs"),
    ),
    Option(
        "llm_top_logprobs",
        group=_LLM,
        metavar="N",
        help="also ask for the N most likely alternatives at each token (>= 0; "
        "implies {llm_logprobs})",
        sets=("llm", "top_logprobs"),
    ),
    Option(
        "llm_extra_body",
        group=_LLM,
        parse=v.json_text,
        metavar="JSON",
        help="a JSON object merged into every request, e.g. vLLM's "
        "'{\"return_token_ids\": true}' or '{\"return_tokens_as_token_ids\": true}'",
        sets=("llm", "extra_body"),
    ),
    Option(
        "hf_model",
        group=_HF,
        metavar="PATH_OR_NAME",
        help="the transformers checkpoint the hf policy plays: a folder, or a hub name "
        "already in the local cache (the hf extra)",
        sets=("hf", "model"),
    ),
    Option(
        "hf_batch",
        group=_HF,
        metavar="N",
        help="turns pending across episodes answered by one generate call, at most (default 16)",
        sets=("hf", "batch"),
    ),
    Option(
        "hf_batch_wait_ms",
        group=_HF,
        metavar="MS",
        help="how long a batch waits for more turns after its first (default 5)",
        sets=("hf", "batch_wait_ms"),
    ),
    Option(
        "hf_dtype",
        group=_HF,
        help="the weights' dtype: auto (the checkpoint's), float32, bfloat16 or float16",
        sets=("hf", "dtype"),
    ),
    Option(
        "hf_device",
        group=_HF,
        help="cpu, cuda, cuda:N, mps, or auto (default: an accelerator, else the CPU)",
        sets=("hf", "device"),
    ),
    Option(
        "hf_max_new_tokens",
        group=_HF,
        metavar="N",
        help="the most tokens one answer generates (default 256)",
        sets=("hf", "max_new_tokens"),
    ),
    Option(
        "hf_temperature",
        group=_HF,
        metavar="T",
        help="sampling temperature, 0 to 2 (default 0: greedy decoding)",
        sets=("hf", "temperature"),
    ),
    Option(
        "hf_top_p",
        group=_HF,
        metavar="P",
        help="nucleus sampling, above 0 up to 1 (with a temperature above 0)",
        sets=("hf", "top_p"),
    ),
    Option(
        "hf_seed",
        group=_HF,
        metavar="N",
        help="torch's seed, set once the model is loaded",
        sets=("hf", "seed"),
    ),
    Option(
        "hf_answer",
        group=_HF,
        help="tools (the take_action tool, rendered by the chat template), json (a JSON "
        "object the prompt describes), or auto (default: tools when the template renders "
        "tools)",
        sets=("hf", "answer"),
    ),
    Option(
        "hf_system_prompt",
        group=_HF,
        help="system (default) or user: fold the role prompt into the first user message",
        sets=("hf", "system_prompt"),
    ),
    Option(
        "hf_conversation",
        group=_HF,
        help="turn (default: each turn's view rendered afresh, the runtime's prompts) or "
        "episode (one chat of tool calls per role and episode, as GRPO's rollouts hold it)",
        sets=("hf", "conversation"),
    ),
    Option(
        "config",
        group=_RUN,
        parse=v.run_file,
        metavar="RUN.toml",
        help="a run file: suites, each role's policy, named LLM endpoints, deadlines... "
        "(see examples/run.toml); options given here override it",
    ),
    Option(
        "out",
        group=_RUN,
        parse=v.folder,
        metavar="DIR",
        help="output folder (default: a new runs/<UTC time>-<policy>, and runs/latest "
        "points to it)",
        file_key="out",
    ),
    Option(
        "resume",
        group=_RUN,
        switch=True,
        help="continue the run in {out} (default runs/latest) from its run.json: skip "
        "episodes already in results.jsonl",
    ),
    Option(
        "fsync",
        group=_RUN,
        switch=True,
        help="fsync after every episode (power-loss safety)",
    ),
)


RECORDED = tuple(option for option in OPTIONS if option.recorded is not None)
"""The options run.json records, in the order ``--resume`` compares them."""


MODEL_GROUPS = (_MODELS, *dict.fromkeys(option.group for option in OPTIONS if option.sets))
"""The option groups of the model policies, each declared under a heading of its own."""
RUN_GROUPS = (_WHO, _PLAN, _PACING, _WATCH, _RUN)
"""The groups of ``chaosops run``'s own options."""
EVAL_GROUPS = (_PLAN, _PACING, _WATCH)
"""The groups ``chaosops eval`` shares (it chooses its players its own way)."""


def options_of(groups: Sequence[str]) -> Iterator[Option]:
    return (option for option in OPTIONS if option.group in groups)


MERGED: Mapping[str, Any] = MappingProxyType(
    {"named_models": None, "from_run_file": frozenset(), "scenarios": None,
     "llm_api_key_env": None}
)  # fmt: skip
"""What the merge adds to the parsed arguments (the run file's models, the
options it stood for, a resumed Python run's scenarios, the key's variable),
declared on every parser that builds a run: none is read with a default."""


SERVED = ("config", "policy", "role_policy", "turn_timeout", "role_timeout", "log_json",
          "metrics_port", "metrics_host", "otlp_endpoint")  # fmt: skip
"""The options ``chaosops serve`` shares with ``run``: who plays the roles clients
leave, their deadlines, and how the server is watched (and the LLM group)."""


def recorded_values(spec: RunSpec) -> dict[str, Any]:
    """What run.json records of the run options, read off the run's spec."""
    values = {str(option.recorded): option.record(spec) for option in RECORDED if option.record}
    return {name: value for name, value in values.items() if value is not ABSENT}


def own_settings(kind: str) -> tuple[tuple[str, str], ...]:
    """The options that set ``[KIND.KIND]``, a kind's own model (the one named
    as the kind): (settings' field, option's field)."""
    return _OWN_SETTINGS[kind]


_OWN_SETTINGS: Mapping[str, Any] = MappingProxyType({
    kind: tuple((o.sets[1], o.dest) for o in OPTIONS if o.sets and o.sets[0] == kind)
    for kind in KIND_NAMES
})  # fmt: skip
