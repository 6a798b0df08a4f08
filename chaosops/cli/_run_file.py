"""``--config run.toml``: a run file, read into the command line's namespace.

A run file holds what a run's options hold, plus named models of each kind
(``[llm.NAME]`` endpoints, ``[hf.NAME]`` checkpoints) that ``policy`` and
``[roles]`` can name. Options given on
the command line override the file; ``--role-policy`` and ``--role-timeout``
override it role by role. See ``examples/run.toml``.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import GenericAlias, MappingProxyType
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, create_model

from chaosops._toml import FileProblem, read_toml
from chaosops.runs.kinds import KINDS
from chaosops.runs.options import OPTIONS
from chaosops.runs.policies import known_policy, unknown_policy
from chaosops.runs.values import POLICIES, ROLES, refusal

from ._args import given_options
from ._errors import CLIError, refusal_text
from ._flags import flags, flags_of

_NAME = re.compile(r"[A-Za-z0-9_.-]+")
# strict: a run file's values are validated exactly as the flags' (no "4" for 4)
_FORBID = ConfigDict(extra="forbid", strict=True)


def _keys(*, table: str | None = None, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The fields of a run file's top level, or of a model kind's ``[TABLE.NAME]``
    tables (``table``), read off the options; then ``extra``."""
    fields: dict[str, Any] = {}
    for option in OPTIONS:
        if (key := option.table_key(table)) is not None:
            fields[key] = option.file_field()
    return {**fields, **(extra or {})}


# an LLM's key is never in a file: its table names the variable that holds it
_KEY_VARIABLE = MappingProxyType({"api_key_env": (str | None, Field(default=None, min_length=1))})


def _entry(kind: Any) -> Any:
    """The model of one ``[KIND.NAME]`` table, made from the options' table."""
    extra = _KEY_VARIABLE if kind.name == "llm" else {}
    return create_model(
        f"{kind.settings.__name__}Entry",
        __config__=_FORBID,
        __doc__=f"One ``[{kind.name}.NAME]`` table: {kind.noun} and how to play it, each key "
        f"a {kind.settings.__name__} field (its type, bounds and default).",
        **_keys(table=kind.name, extra=extra),
    )


def _tables(entry: Any) -> tuple[Any, Any]:
    """A run file's ``[KIND.NAME]`` tables: name -> one entry."""
    return (GenericAlias(dict, (str, entry)), Field(default={}))


# Models made from the options' table: their fields are known at run time (Any to mypy).
ENTRIES: Mapping[str, Any] = MappingProxyType({kind.name: _entry(kind) for kind in KINDS})
RunFile: Any = create_model(
    "RunFile",
    __config__=_FORBID,
    __doc__="A run file's top level (every key optional).",
    **_keys(extra={name: _tables(entry) for name, entry in ENTRIES.items()}),
)

# The options a run file's top level and its [llm.llm] set: (key, attribute, flags).
_TOP = tuple(
    (option.file_key, option.dest, flags(option))
    for option in OPTIONS
    if option.file_key and not option.positional and option.dest != "out"
)


class RunFileError(FileProblem):
    """A run file that cannot be used: one line naming the file, the field and
    what is accepted."""


def read_run_file(path: Path) -> Any:  # a RunFile
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
        if error["loc"][-1] == "[key]":  # a table's key: [roles] ceo = ...
            where = ".".join(str(part) for part in error["loc"][:-1])
            raise RunFileError(path, where, f"no such key; {_keys_of(error['loc'])}") from None
        shown = "" if isinstance(got, dict | list) else f" (got {got!r})"
        said = error["msg"] if error["type"] == "missing" else _expected(error["loc"], error["msg"])
        if error["type"] in ("list_type", "tuple_type") and isinstance(got, str):
            said = f"expected a list, e.g. {error['loc'][-1]} = [{got!r}]; each {said}"
        if (why := refusal(exc)) is not None:  # a validator of ours said why
            said = f"{said}: {why}"
        raise RunFileError(path, where, f"{said}{shown}") from None
    _check_names(path, run_file)
    return run_file


def _expected(loc: tuple[Any, ...], said: str) -> str:
    """What a value at ``loc`` must be, in the flags' words (pydantic's ``said`` else)."""
    table = loc[0] if loc[0] in ENTRIES and len(loc) >= 3 else None
    key = loc[2] if table else loc[0]
    for option in OPTIONS:
        if option.kind is not None and option.table_key(table) == key:
            return option.expected
    return said


def _keys_of(loc: tuple[Any, ...]) -> str:
    """The keys a table of the run file takes (the roles, for ``[roles]``)."""
    if loc[0] == "roles":
        return f"[roles] names roles: {', '.join(ROLES)}"
    return "see examples/run.toml for the keys it takes"


def _unknown_key(loc: tuple[Any, ...]) -> str:
    """What to say of a key the run file does not know: the nearest it does."""

    key = str(loc[-1])
    known = list((ENTRIES[loc[0]] if loc[0] in ENTRIES and len(loc) == 3 else RunFile).model_fields)
    near = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return f"unknown key; {hint}the keys are {', '.join(known)}"


def _check_names(path: Path, run_file: Any) -> None:
    """Model names a policy can name; policies that name something there is."""

    named: list[str] = []
    for kind in KINDS:
        taken = [p for p in POLICIES if p != kind.name]  # [llm.llm], [hf.hf]: the flags' own
        for name in getattr(run_file, kind.name):
            if name in taken or name in named or not _NAME.fullmatch(name):
                raise RunFileError(
                    path,
                    f"{kind.name}.{name}",
                    f"{kind.noun}'s name is ASCII letters, digits, '_', '.' or '-', and not a "
                    f"scripted policy's nor another kind's ({', '.join(taken)}), nor another "
                    "table's",
                )
            named.append(name)
    chosen = [("policy", run_file.policy)] + [(f"roles.{r}", p) for r, p in run_file.roles.items()]
    for where, policy in chosen:
        if policy is not None and not known_policy(policy, named):
            raise RunFileError(path, where, unknown_policy(policy, named))


def apply_run_file(args: argparse.Namespace, argv: Sequence[str]) -> argparse.Namespace:
    """``args`` with the run file's values where the command line gave none
    (``args.config``); its named models, of every kind, go in ``args.named_models``."""

    args.named_models = {}
    if args.config is None:
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
    top = {key: getattr(run_file, key) for key, _, _ in _TOP}
    _fill(args, {key: value for key, value in top.items() if value is not None and value != {}},
          _TOP, given)  # fmt: skip
    for kind in KINDS:
        for name, entry in getattr(run_file, kind.name).items():
            if name == kind.name:  # the flags' own model of the kind
                values = {field: getattr(entry, field) for field in entry.model_fields_set}
                _fill(args, values, flags_of(kind.name), given)
            else:
                args.named_models[name] = _named_model(path, kind, name, entry)
    _read_keys_from(args, run_file, given)
    return args


def _named_model(path: Path, kind: Any, name: str, entry: Any) -> Any:
    """A ``[KIND.NAME]`` table's settings; settings that do not go together
    (each key was valid) are one line naming the table."""
    try:
        return kind.settings(**entry.model_dump())
    except ValueError as exc:
        raise CLIError(f"{path}: [{kind.name}.{name}]: {refusal_text(exc)}") from None


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
        if field not in values:
            continue
        value = values[field]
        if isinstance(value, dict) and isinstance(getattr(args, attribute), list):
            # a role-by-role table (roles, role_timeout): the flags' roles win
            setattr(args, attribute, [*value.items(), *getattr(args, attribute)])
        elif not given.intersection(options):
            setattr(args, attribute, list(value) if isinstance(value, list) else value)
        else:
            continue
        args.from_run_file.update(options)


def _read_keys_from(args: argparse.Namespace, run_file: Any, given: set[str]) -> None:
    """The LLMs' keys: each table's ``api_key_env`` must be set where it is used
    (the flags' own LLM's, unless ``--llm-api-key`` gives the key)."""
    for name, entry in run_file.llm.items():
        if entry.api_key_env is None or (name == "llm" and "--llm-api-key" in given):
            continue
        _check_key(entry.api_key_env, Path(args.config), name)
        if name == "llm":
            args.llm_api_key_env = entry.api_key_env


def _check_key(variable: str, path: Path, name: str) -> None:
    if not os.environ.get(variable):
        raise CLIError(
            f"{path}: llm.{name}.api_key_env: environment variable {variable} is not set; "
            "export the key there"
        )
