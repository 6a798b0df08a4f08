"""The options of ``chaosops run``, declared once.

Each :class:`Option` says how the command line takes it (flag, value type,
default, help), which key of a run file sets it, whether ``run.json`` records
it, and whether ``--resume`` takes it back or refuses a different value. The
parser, the run-file models, ``run.json`` and the resume checks are all read
off :data:`OPTIONS`. ``chaosops eval`` shares the options of every group but
``run``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field
from pydantic.fields import FieldInfo

from . import values as v

Role = Literal["sre", "oversight", "dev", "manager"]
Seconds = Annotated[float, AfterValidator(v.positive_seconds)]
NAME_PATTERN = r"[A-Za-z0-9_.+=-]+"
ABSENT = object()
"""What a record function returns for an option that run.json leaves out."""


@dataclass(frozen=True, slots=True)
class Option:
    """One option: the command line's, the run file's and run.json's view of it.

    ``file`` is the run-file key's type and default as pydantic reads them;
    ``llm_key`` marks a setting of an ``[llm.NAME]`` entry, ``[llm.llm]``
    being the flags' own LLM. ``recorded`` is the run.json field and
    ``record`` reads it off the run's configuration; ``restore`` turns it
    back into the flag's value on ``--resume`` (None: not restored), and
    ``must_match`` makes ``--resume`` refuse a run given another value.
    """

    flags: tuple[str, ...]
    dest: str
    help: str
    group: str
    type: Callable[[str], Any] | None = None
    default: Any = None
    default_env: str | None = None  # an environment variable read before the default
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    repeatable: bool = False
    switch: bool = False
    file_key: str | None = None
    llm_key: str | None = None
    file: tuple[Any, FieldInfo] | None = None
    recorded: str | None = None
    record: Callable[[Any], Any] | None = None
    restore: Callable[[Any], Any] | None = None
    must_match: bool = False
    serve_help: str | None = None  # chaosops serve's own words, where run's do not fit

    @property
    def flag(self) -> str:
        """The name messages give the option (a positional's metavar)."""
        return self.flags[0] if self.flags else f"{self.metavar} (the suites)"

    def add_to(self, parser: Any, serving: bool = False) -> None:
        """Declare the option on an argparse parser or group (``serving``: serve's)."""
        text = self.serve_help if serving and self.serve_help else self.help
        if self.switch:
            parser.add_argument(*self.flags, dest=self.dest, action="store_true", help=text)
            return
        if not self.flags:  # the positional suites
            parser.add_argument(self.dest, nargs="*", metavar=self.metavar, help=text)
            return
        default = self.default
        if self.default_env is not None:
            default = os.environ.get(self.default_env) or default  # empty: unset
        if self.repeatable:
            default = []
        parser.add_argument(
            *self.flags,
            dest=self.dest,
            action="append" if self.repeatable else "store",
            type=self.type,
            default=default,
            metavar=self.metavar,
            choices=self.choices,
            help=text,
        )


def _items(value: Any) -> list[Any]:
    return list((value or {}).items())


def _listed(value: Any) -> list[Any]:
    return list(value or [])


def _same(value: Any) -> Any:
    return value


def _flag_llm(name: str) -> Callable[[Any], Any]:
    """A setting of the flags' LLM, recorded when a role plays ``llm``."""

    def record(config: Any) -> Any:
        if "llm" not in config.policy_by_role.values():
            return ABSENT
        return getattr(config.llm, name)

    return record


def _optional(annotation: Any, **constraints: Any) -> tuple[Any, FieldInfo]:
    return (Annotated[annotation, Field(**constraints)] | None, Field(default=None))


def _llm(annotation: Any, default: Any, **constraints: Any) -> tuple[Any, FieldInfo]:
    return (annotation, Field(default=default, **constraints))


_WHO = "who plays"
_PLAN = "what to play"
_PACING = "how it is played"
_WATCH = "how it is watched"
_LLM = "LLM policy (the llm policy of --policy or --policies)"
_RUN = "run"

OPTIONS: tuple[Option, ...] = (
    Option(
        ("--policy",),
        "policy",
        group=_WHO,
        default="heuristic",
        help="policy playing the four roles (default heuristic): random, heuristic, oracle, "
        "llm, an LLM named in the run file, or module:attribute",
        file_key="policy",
        file=_optional(str),
        recorded="policy",
        record=lambda c: c.policy,
        restore=str,
        must_match=True,
    ),
    Option(
        ("--name",),
        "name",
        group=_WHO,
        type=v.name,
        help="what the outputs call this run's players (their 'policy'; default: the "
        "policies, e.g. heuristic+dev=oracle)",
        file_key="name",
        file=_optional(str, pattern=NAME_PATTERN),
        recorded="name",
        record=lambda c: c.name,
        restore=_same,
        must_match=True,
    ),
    Option(
        ("--role-policy",),
        "role_policy",
        group=_WHO,
        type=v.role_policy,
        repeatable=True,
        metavar="ROLE=POLICY",
        help="the policy of one role over --policy (repeatable): a scripted name, llm, an "
        "LLM named in the run file, or module:attribute, a policy (observation, role) or a "
        "factory (scenario -> role map)",
        file_key="roles",
        file=(dict[Role, str], Field(default={})),
        recorded="role_policies",
        record=lambda c: dict(c.role_policies) or None,
        restore=_items,
        must_match=True,
    ),
    Option(
        ("--episodes-per-type",),
        "episodes_per_type",
        group=_PLAN,
        type=v.episodes_per_type,
        metavar="N",
        help="replace the suites' seeds: N seeds per (failure type, tier) entry, seed = seed "
        "offset + 97*i + 31*r as in scenarios_for_tier "
        f"(1 to {v.MAX_EPISODES_PER_TYPE})",
        file_key="episodes_per_type",
        file=_optional(int, ge=1, le=v.MAX_EPISODES_PER_TYPE),
        recorded="episodes_per_type",
        record=lambda c: c.episodes_per_type,
        restore=_same,
        must_match=True,
    ),
    Option(
        ("--seed-offset",),
        "seed_offset",
        group=_PLAN,
        type=v.integer,
        default=0,
        metavar="N",
        help="added to every seed (default 0); the seeds it gives must stay within 0 to 2^63-1",
        file_key="seed_offset",
        file=_optional(int),
        recorded="seed_offset",
        record=lambda c: c.seed_offset,
        restore=int,
        must_match=True,
    ),
    Option(
        ("--tier",),
        "tier",
        group=_PLAN,
        choices=v.TIERS,
        repeatable=True,
        help="only the scenarios of this tier (repeatable)",
        file_key="tiers",
        file=_optional(list[Literal["easy", "medium", "hard"]]),
        recorded="tiers",
        record=lambda c: list(c.tiers) or None,
        restore=_listed,
        must_match=True,
    ),
    Option(
        ("--failure-type",),
        "failure_type",
        group=_PLAN,
        type=v.failure_type,
        repeatable=True,
        metavar="TYPE",
        help="only the scenarios of this failure type (repeatable), e.g. db_deadlock",
        file_key="failure_types",
        file=_optional(list[str]),
        recorded="failure_types",
        record=lambda c: list(c.failure_types) or None,
        restore=_listed,
        must_match=True,
    ),
    Option(
        ("--limit",),
        "limit",
        group=_PLAN,
        type=v.positive_int,
        metavar="N",
        help="only the first N scenarios of the plan, after --tier and --failure-type",
        file_key="limit",
        file=_optional(int, ge=1),
        recorded="limit",
        record=lambda c: c.limit,
        restore=_same,
        must_match=True,
    ),
    Option(
        ("--samples",),
        "samples",
        group=_PLAN,
        type=v.int_from(1, 1000),
        metavar="K",
        help="play each scenario K times (1 to 1000; default 1), the scripted policies "
        "seeded anew each time; the table and summary.json then give pass@1 and pass@K",
        file_key="samples",
        file=_optional(int, ge=1, le=1000),
        recorded="samples",
        record=lambda c: c.samples,
        restore=_same,
        must_match=True,
    ),
    Option(
        (),
        "paths",
        group=_PLAN,
        metavar="PATH",
        help="scenario suite files (.toml) or folders of them; default: the canonical "
        "easy, medium and hard suites",
        file_key="paths",
        file=_optional(list[str]),
        recorded="paths",
        record=lambda c: [str(p) for p in c.paths],
        restore=list,
        must_match=True,
    ),
    Option(
        ("--concurrency",),
        "concurrency",
        group=_PACING,
        type=v.positive_int,
        default=64,
        metavar="N",
        help="episodes in flight at once (>= 1, default 64; with --ray, in all the workers)",
        file_key="concurrency",
        file=_optional(int, ge=1),
        recorded="concurrency",
        record=lambda c: c.concurrency,
    ),
    Option(
        ("--ray",),
        "ray",
        group=_PACING,
        metavar="ADDRESS",
        help="run the episodes on Ray worker actors: 'local' (an instance for this run, on "
        "127.0.0.1), 'auto' or HOST:PORT (a running cluster); needs the 'ray' extra",
    ),
    Option(
        ("--workers",),
        "workers",
        group=_PACING,
        type=v.positive_int,
        metavar="N",
        help="Ray worker actors (default: one per CPU of the cluster); with --ray",
    ),
    Option(
        ("--turn-timeout",),
        "turn_timeout",
        group=_PACING,
        type=v.seconds,
        metavar="SECONDS",
        help="deadline of every turn (default: none; suites may set per-role ones)",
        file_key="turn_timeout",
        file=(Seconds | None, Field(default=None)),
        recorded="turn_timeout",
        record=lambda c: c.deadlines.turn_timeout,
        restore=_same,
        must_match=True,
    ),
    Option(
        ("--role-timeout",),
        "role_timeout",
        group=_PACING,
        type=v.role_timeout,
        repeatable=True,
        metavar="ROLE=SECONDS",
        help="deadline of one role's turns (repeatable), e.g. --role-timeout dev=2.5",
        file_key="role_timeout",
        file=(dict[Role, Seconds], Field(default={})),
        recorded="role_timeout",
        record=lambda c: c.deadlines.per_role,
        restore=_items,
        must_match=True,
    ),
    Option(
        ("--max-policy-errors",),
        "max_policy_errors",
        group=_PACING,
        type=v.error_limit,
        metavar="N|P%",
        help="stop the run (exit 1, finished episodes kept for --resume) once N turns in a "
        "row failed with a policy error, any policy's, or once P%% of the turns did (judged "
        "from the 100th turn on); default: never",
        file_key="max_policy_errors",
        file=_optional(int, ge=1),
        recorded="max_policy_errors",
        record=lambda c: c.max_policy_errors,
    ),
    Option(
        ("--log-json",),
        "log_json",
        group=_WATCH,
        metavar="PATH",
        help="write structured JSON logs to PATH ('-' for stdout, the table then going to "
        "stderr; 'off' for none). Default for run: OUT/log.jsonl",
        serve_help="write structured JSON logs to PATH ('-' for stdout; 'off' for none). "
        "Default: OUT/log.jsonl",
    ),
    Option(
        ("--metrics-port",),
        "metrics_port",
        group=_WATCH,
        type=v.port,
        metavar="PORT",
        help="serve Prometheus metrics on http://HOST:PORT/metrics while the command runs "
        "(0: a free port; the address is printed)",
    ),
    Option(
        ("--metrics-host",),
        "metrics_host",
        group=_WATCH,
        metavar="HOST",
        help="address the metrics are served on (default 127.0.0.1; 0.0.0.0: every interface)",
    ),
    Option(
        ("--metrics-linger",),
        "metrics_linger",
        group=_WATCH,
        type=v.non_negative,
        metavar="SECONDS",
        help="keep serving the final metrics this long after the run (for a last scrape)",
    ),
    Option(
        ("--otlp-endpoint",),
        "otlp_endpoint",
        group=_WATCH,
        metavar="URL",
        help="send OpenTelemetry traces (a span per episode and per turn) over OTLP/HTTP to "
        "URL, e.g. http://127.0.0.1:4318 (needs the otel extra; OTEL_EXPORTER_OTLP_HEADERS "
        "and OTEL_SERVICE_NAME are honoured)",
    ),
    Option(("--no-progress",), "no_progress", group=_WATCH, switch=True, help="no progress bar"),
    Option(
        ("--llm-base-url", "--base-url"),
        "llm_base_url",
        group=_LLM,
        default="http://127.0.0.1:8000/v1",
        default_env="OPENAI_BASE_URL",
        metavar="URL",
        help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL or "
        "http://127.0.0.1:8000/v1, the mock-llm default)",
        llm_key="base_url",
        file=_llm(str | None, None),
    ),
    Option(
        ("--llm-model", "--model"),
        "llm_model",
        group=_LLM,
        default="chaosops-mock",
        metavar="NAME",
        help="model name (default chaosops-mock, the mock-llm's)",
        llm_key="model",
        file=(str, Field(min_length=1)),
        recorded="llm_model",
        record=_flag_llm("model"),
        restore=str,
        must_match=True,
    ),
    Option(
        ("--llm-api-key",),
        "llm_api_key",
        group=_LLM,
        metavar="KEY",
        help="API key (default $OPENAI_API_KEY); never printed or written",
    ),
    Option(
        ("--llm-max-in-flight",),
        "llm_max_in_flight",
        group=_LLM,
        type=v.int_from(1, 100_000),
        default=64,
        metavar="N",
        help="requests in flight at once, across all episodes (1 to 100000, default 64)",
        llm_key="max_in_flight",
        file=_llm(int, 64, ge=1, le=100_000),
    ),
    Option(
        ("--llm-max-answer-bytes",),
        "llm_max_answer_bytes",
        group=_LLM,
        type=v.int_from(1024, 1 << 30),
        default=1 << 20,
        metavar="N",
        help="bytes read of one answer at most (default 1 MiB): a longer one is not read "
        "further, and the turn plays the fallback with the error",
        llm_key="max_answer_bytes",
        file=_llm(int, 1 << 20, ge=1024, le=1 << 30),
    ),
    Option(
        ("--llm-max-failures",),
        "llm_max_failures",
        group=_LLM,
        type=v.non_negative_int,
        default=10,
        metavar="N",
        help="stop the run (exit 1, finished episodes kept for --resume) once N LLM calls "
        "in a row failed for good, retries spent: the endpoint went away (default 10; "
        "0: never stop, every such turn plays the fallback)",
        serve_help="not used by serve: a server keeps serving, and a turn whose LLM call "
        "failed for good plays the fallback",
        file_key="llm_max_failures",
        file=_optional(int, ge=0),
        recorded="llm_max_failures",
        record=lambda c: c.llm_max_failures,
    ),
    Option(
        ("--temperature",),
        "temperature",
        group=_LLM,
        type=v.non_negative,
        default=0.0,
        help="sampling temperature",
        llm_key="temperature",
        file=_llm(float, 0.0, ge=0.0, le=2.0),
        recorded="temperature",
        record=_flag_llm("temperature"),
        restore=float,
        must_match=True,
    ),
    Option(
        ("--top-p",),
        "top_p",
        group=_LLM,
        type=v.share,
        metavar="P",
        help="nucleus sampling",
        llm_key="top_p",
        file=_llm(float | None, None, gt=0.0, le=1.0),
    ),
    Option(
        ("--llm-seed",),
        "llm_seed",
        group=_LLM,
        type=v.integer,
        metavar="N",
        help="sampling seed sent to the server",
        llm_key="seed",
        file=_llm(int | None, None),
    ),
    Option(
        ("--llm-answer",),
        "llm_answer",
        group=_LLM,
        default="auto",
        choices=v.ANSWERS,
        help="how the model answers, each format but text constrained to the turn's legal "
        "moves: auto (default: the first of the next four the server accepts, probed at the "
        "start), json (response_format json_schema; OpenAI, vLLM, Ollama), json_object "
        "(response_format json_object with the schema; llama-cpp-python), tools (the "
        "take_action tool, named), text (parsed tolerantly)",
        llm_key="answer",
        file=_llm(Literal[v.ANSWERS], "auto"),
    ),
    Option(
        ("--llm-system-prompt",),
        "llm_system_prompt",
        group=_LLM,
        default="system",
        choices=("system", "user"),
        help="where the role prompt goes: a system message (default), or folded into the "
        "first user message (user: for models whose chat template has no system role)",
        llm_key="system_prompt",
        file=_llm(Literal["system", "user"], "system"),
    ),
    Option(
        ("--llm-retries",),
        "llm_retries",
        group=_LLM,
        type=v.int_from(0, 100),
        default=4,
        metavar="N",
        help="retries of a failed call within the turn's deadline (default 4)",
        llm_key="retries",
        file=_llm(int, 4, ge=0, le=100),
    ),
    Option(
        ("--llm-history",),
        "llm_history",
        group=_LLM,
        type=v.int_from(0, 1000),
        default=0,
        metavar="N",
        help="send each LLM role its own last N turns of the episode (what it saw and "
        "answered) as earlier messages (default 0: none)",
        llm_key="history",
        file=_llm(int, 0, ge=0, le=1000),
    ),
    Option(
        ("--max-tokens",),
        "max_tokens",
        group=_LLM,
        type=v.positive_int,
        default=256,
        metavar="N",
        help="completion limit",
        llm_key="max_tokens",
        file=_llm(int, 256, ge=1, le=1_000_000),
        recorded="max_tokens",
        record=_flag_llm("max_tokens"),
        restore=int,
        must_match=True,
    ),
    Option(
        ("--llm-logprobs",),
        "llm_logprobs",
        group=_LLM,
        switch=True,
        help="ask for the logprobs of the completion's tokens; trajectories.jsonl then "
        "records logprobs and tokens (or token_ids) per LLM turn",
        llm_key="logprobs",
        file=_llm(bool, False),
    ),
    Option(
        ("--llm-top-logprobs",),
        "llm_top_logprobs",
        group=_LLM,
        type=v.non_negative_int,
        metavar="N",
        help="also ask for the N most likely alternatives at each token (>= 0; "
        "implies --llm-logprobs)",
        llm_key="top_logprobs",
        file=_llm(int | None, None, ge=0, le=20),
    ),
    Option(
        ("--llm-extra-body",),
        "llm_extra_body",
        group=_LLM,
        type=v.json_object,
        metavar="JSON",
        help="a JSON object merged into every request, e.g. vLLM's "
        "'{\"return_token_ids\": true}' or '{\"return_tokens_as_token_ids\": true}'",
        llm_key="extra_body",
        file=_llm(dict[str, Any] | None, None),
    ),
    Option(
        ("--config",),
        "config",
        group=_RUN,
        type=v.run_file,
        metavar="RUN.toml",
        help="a run file: suites, each role's policy, named LLM endpoints, deadlines... "
        "(see examples/run.toml); options given here override it",
    ),
    Option(
        ("--out",),
        "out",
        group=_RUN,
        type=v.folder,
        metavar="DIR",
        help="output folder (default: a new runs/<UTC time>-<policy>, and runs/latest "
        "points to it)",
        file_key="out",
        file=_optional(str),
    ),
    Option(
        ("--resume",),
        "resume",
        group=_RUN,
        switch=True,
        help="continue the run in --out (default runs/latest) from its run.json: skip "
        "episodes already in results.jsonl",
    ),
    Option(
        ("--fsync",),
        "fsync",
        group=_RUN,
        switch=True,
        help="fsync after every episode (power-loss safety)",
    ),
)


REPEATABLE = frozenset(flag for option in OPTIONS if option.repeatable for flag in option.flags)
"""The options that may be given more than once (each adds a value)."""

RECORDED = tuple(option for option in OPTIONS if option.recorded is not None)
"""The options run.json records, in the order ``--resume`` compares them."""


def options_of(groups: Sequence[str]) -> Iterator[Option]:
    return (option for option in OPTIONS if option.group in groups)


def add_options(parser: argparse.ArgumentParser, *, run: bool) -> None:
    """Declare the table's options on ``chaosops run``'s parser, or (``run``
    false) on ``chaosops eval``'s, which chooses its players its own way."""
    groups = [_PLAN, _PACING, _WATCH] if not run else [_WHO, _PLAN, _PACING, _WATCH, _RUN]
    for option in options_of(groups):
        option.add_to(parser)
    llm = parser.add_argument_group(_LLM)
    for option in options_of([_LLM]):
        option.add_to(llm)


SERVED = ("config", "policy", "role_policy", "turn_timeout", "role_timeout", "log_json",
          "metrics_port", "metrics_host", "otlp_endpoint")  # fmt: skip
"""The options ``chaosops serve`` shares with ``run``: who plays the roles clients
leave, their deadlines, and how the server is watched (and the LLM group)."""


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """Declare the options of :data:`SERVED` and the LLM group on ``chaosops serve``'s parser."""
    for option in OPTIONS:
        if option.dest in SERVED:
            option.add_to(parser, serving=True)
    llm = parser.add_argument_group(_LLM)
    for option in options_of([_LLM]):
        option.add_to(llm, serving=True)


def recorded_values(config: Any) -> dict[str, Any]:
    """What run.json records of the run options, read off the run's configuration."""
    values = {option.recorded: option.record(config) for option in RECORDED}  # type: ignore[misc]
    return {name: value for name, value in values.items() if value is not ABSENT}


LLM_FLAGS = tuple(
    (option.llm_key, option.dest, option.flags) for option in OPTIONS if option.llm_key
)
"""The settings of ``[llm.llm]``, the flags' own LLM: (key, attribute, flags)."""
