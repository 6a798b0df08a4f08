"""``--config run.toml``: a run file, read into the command line's namespace.

A run file holds what a run's options hold, plus named LLM endpoints
(``[llm.NAME]``) that ``policy`` and ``[roles]`` can name. Options given on
the command line override the file; ``--role-policy`` and ``--role-timeout``
override it role by role. See ``examples/run.toml``.
"""

from __future__ import annotations

import argparse
import difflib
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from chaosops._toml import FileProblem, read_toml
from chaosops.agents.llm.settings import LLMSettings
from chaosops.env.models import FailureType

from ._args import POLICIES, given_options
from ._errors import CLIError

Role = Literal["sre", "oversight", "dev", "manager"]
_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def _positive_seconds(value: float) -> float:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"expected a positive number of seconds, got {value!r}")
    return value


Seconds = Annotated[float, AfterValidator(_positive_seconds)]


class LLMEntry(BaseModel):
    """One ``[llm.NAME]`` table: an endpoint, its model and how to ask it."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, min_length=1)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    seed: int | None = None
    max_tokens: int = Field(default=256, ge=1, le=1_000_000)
    answer: Literal["auto", "json", "json_object", "tools", "text"] = "auto"
    system_prompt: Literal["system", "user"] = "system"
    retries: int = Field(default=4, ge=0, le=100)
    max_in_flight: int = Field(default=64, ge=1, le=100_000)
    max_answer_bytes: int = Field(default=1 << 20, ge=1024, le=1 << 30)
    history: int = Field(default=0, ge=0, le=1_000)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    extra_body: dict[str, Any] | None = None


class RunFile(BaseModel):
    """A run file's top level (every field optional)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, pattern=_NAME.pattern)
    paths: list[str] | None = None
    episodes_per_type: int | None = Field(default=None, ge=1, le=100_000)
    seed_offset: int | None = None
    tiers: list[Literal["easy", "medium", "hard"]] | None = None
    failure_types: list[str] | None = None
    limit: int | None = Field(default=None, ge=1)
    concurrency: int | None = Field(default=None, ge=1)
    turn_timeout: Seconds | None = None
    role_timeout: dict[Role, Seconds] = {}
    policy: str | None = None
    roles: dict[Role, str] = {}
    llm: dict[str, LLMEntry] = {}
    llm_max_failures: int | None = Field(default=None, ge=0)
    max_policy_errors: int | None = Field(default=None, ge=1)
    samples: int | None = Field(default=None, ge=1, le=1000)
    out: str | None = None


# (file field, namespace attribute, its options) of the top level: the file's
# value goes in where none of the options was given
_TOP: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("episodes_per_type", "episodes_per_type", ("--episodes-per-type",)),
    ("seed_offset", "seed_offset", ("--seed-offset",)),
    ("tiers", "tier", ("--tier",)),
    ("failure_types", "failure_type", ("--failure-type",)),
    ("limit", "limit", ("--limit",)),
    ("concurrency", "concurrency", ("--concurrency",)),
    ("turn_timeout", "turn_timeout", ("--turn-timeout",)),
    ("policy", "policy", ("--policy",)),
    ("llm_max_failures", "llm_max_failures", ("--llm-max-failures",)),
    ("max_policy_errors", "max_policy_errors", ("--max-policy-errors",)),
    ("samples", "samples", ("--samples",)),
)

# (entry field, namespace attribute, its options): ``[llm.llm]`` sets the
# flags' own LLM, the one the policy ``llm`` names
LLM_FLAGS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("base_url", "llm_base_url", ("--llm-base-url", "--base-url")),
    ("model", "llm_model", ("--llm-model", "--model")),
    ("temperature", "temperature", ("--temperature",)),
    ("top_p", "top_p", ("--top-p",)),
    ("seed", "llm_seed", ("--llm-seed",)),
    ("max_tokens", "max_tokens", ("--max-tokens",)),
    ("answer", "llm_answer", ("--llm-answer",)),
    ("system_prompt", "llm_system_prompt", ("--llm-system-prompt",)),
    ("retries", "llm_retries", ("--llm-retries",)),
    ("max_in_flight", "llm_max_in_flight", ("--llm-max-in-flight",)),
    ("max_answer_bytes", "llm_max_answer_bytes", ("--llm-max-answer-bytes",)),
    ("history", "llm_history", ("--llm-history",)),
    ("logprobs", "llm_logprobs", ("--llm-logprobs",)),
    ("top_logprobs", "llm_top_logprobs", ("--llm-top-logprobs",)),
    ("extra_body", "llm_extra_body", ("--llm-extra-body",)),
)


class RunFileError(FileProblem):
    """A run file that cannot be used: one line naming the file, the field and
    what is accepted."""


def read_run_file(path: Path) -> RunFile:
    """The validated run file at ``path`` (:class:`RunFileError` otherwise)."""
    data = read_toml(path, "run file", RunFileError)
    if isinstance(data.get("llm"), dict):
        for name, entry in data["llm"].items():
            if isinstance(entry, dict) and "api_key" in entry:
                raise RunFileError(
                    path,
                    f"llm.{name}.api_key",
                    "a run file never holds a key; name the environment variable that "
                    "holds it with api_key_env",
                )
    try:
        run_file = RunFile.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            raise RunFileError(path, where, _unknown_key(error["loc"])) from None
        got = error.get("input")
        shown = "" if isinstance(got, dict | list) else f" (got {got!r})"
        raise RunFileError(path, where, f"{error['msg']}{shown}") from None
    _check_names(path, run_file)
    return run_file


def _unknown_key(loc: tuple[Any, ...]) -> str:
    """What to say of a key the run file does not know: the nearest it does."""

    key = str(loc[-1])
    known = list((LLMEntry if loc[0] == "llm" and len(loc) == 3 else RunFile).model_fields)
    near = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return f"unknown key; {hint}the keys are {', '.join(known)}"


def _check_names(path: Path, run_file: RunFile) -> None:
    """LLM names a policy can name; policies that name something there is."""

    for name in run_file.llm:
        if name in POLICIES[:-1] or not _NAME.fullmatch(name):
            raise RunFileError(
                path,
                f"llm.{name}",
                "an LLM's name is letters, digits, '_', '.' or '-', and not a scripted "
                f"policy's ({', '.join(POLICIES[:-1])})",
            )
    accepted = [f.value for f in FailureType]
    for value in run_file.failure_types or ():
        if value not in accepted:
            raise RunFileError(
                path, "failure_types", f"unknown failure type {value!r}; choose from "
                f"{', '.join(accepted)}"
            )  # fmt: skip
    chosen = [("policy", run_file.policy)] + [(f"roles.{r}", p) for r, p in run_file.roles.items()]
    for where, policy in chosen:
        if policy is not None and not known_policy(policy, run_file.llm):
            raise RunFileError(path, where, unknown_policy(policy, run_file.llm))


def known_policy(name: str, llms: Sequence[str] | dict[str, Any]) -> bool:
    """A scripted policy, ``llm``, a named LLM, or ``module:attribute``."""
    return name in POLICIES or name in llms or ":" in name


def unknown_policy(name: str, llms: Sequence[str] | dict[str, Any]) -> str:
    named = f", an LLM of the run file ({', '.join(llms)})" if llms else ""
    return f"unknown policy {name!r}; choose from {', '.join(POLICIES)}{named}, or module:attribute"


def apply_run_file(args: argparse.Namespace, argv: Sequence[str]) -> argparse.Namespace:
    """``args`` with the run file's values where the command line gave none
    (``args.config``); its named LLMs go in ``args.named_llms``."""

    args.named_llms = {}
    if getattr(args, "config", None) is None:
        return args
    path = args.config
    try:
        run_file = read_run_file(path)
    except RunFileError as exc:
        raise CLIError(str(exc)) from None
    given = given_options(argv)
    args.from_run_file = set()  # the options the file stands for: --resume compares them
    base = path.parent
    if run_file.paths is not None and not args.paths:
        args.paths = [str(base / p) for p in run_file.paths]
    if run_file.out is not None and "--out" not in given and args.command == "run":
        args.out = base / run_file.out
    top = {field: getattr(run_file, field) for field, _, _ in _TOP}
    _fill(args, {field: value for field, value in top.items() if value is not None}, _TOP, given)
    args.role_policy = [*run_file.roles.items(), *args.role_policy]  # the flag's win
    args.role_timeout = [*run_file.role_timeout.items(), *args.role_timeout]
    if run_file.roles:
        args.from_run_file.add("--role-policy")
    if run_file.role_timeout:
        args.from_run_file.add("--role-timeout")
    for name, entry in run_file.llm.items():
        if name == "llm":
            _set_flag_llm(args, entry, given)
        else:
            args.named_llms[name] = llm_settings(entry, path, name)
    if run_file.name is not None and "--name" not in given:
        args.name = run_file.name
        args.from_run_file.add("--name")
    return args


def _fill(
    args: argparse.Namespace,
    values: Mapping[str, Any],
    table: Sequence[tuple[str, str, tuple[str, ...]]],
    given: set[str],
) -> None:
    """Each ``(field, attribute, options)`` of ``table`` with a value in ``values``
    goes into ``args`` unless one of its options was given; the options it
    stands for are noted (``--resume`` compares them as if given)."""
    for field, attribute, options in table:
        if field in values and not given.intersection(options):
            value = values[field]
            setattr(args, attribute, list(value) if isinstance(value, list) else value)
            args.from_run_file.update(options)


def _set_flag_llm(args: argparse.Namespace, entry: LLMEntry, given: set[str]) -> None:
    _fill(args, {field: getattr(entry, field) for field in entry.model_fields_set}, LLM_FLAGS,
          given)  # fmt: skip
    if entry.api_key_env is not None and "--llm-api-key" not in given:
        _check_key(entry.api_key_env, Path(args.config), "llm")
        args.llm_api_key_env = entry.api_key_env


def llm_settings(entry: LLMEntry, path: Path, name: str) -> LLMSettings:
    """The settings of a named LLM (its key is read from ``api_key_env`` when used)."""
    if entry.api_key_env is not None:
        _check_key(entry.api_key_env, path, name)
    return LLMSettings(**entry.model_dump())


def _check_key(variable: str, path: Path, name: str) -> None:
    if not os.environ.get(variable):
        raise CLIError(
            f"{path}: llm.{name}.api_key_env: environment variable {variable} is not set; "
            "export the key there"
        )
