"""``chaosops run --resume --out DIR`` alone: the options not given come from DIR's run.json."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chaosops.runs.folder import RunFolder
from chaosops.runs.kinds import KINDS, ModelKind
from chaosops.runs.options import RECORDED

from ._args import given_options
from ._errors import CLIError
from ._flags import flags, flags_of
from ._folders import LATEST, latest_run


def fill_from_run_record(args: argparse.Namespace, argv: Sequence[str]) -> argparse.Namespace:
    """``args`` with what ``chaosops run --resume`` was not given taken from the
    folder's run.json, so that a run resumes with the options it started with.

    Options given on the command line are kept: ``--resume`` then compares
    them with the recorded ones and refuses a difference, naming the option. A
    folder without a readable run.json is left to that check too.
    """
    if args.command != "run" or not args.resume:
        return args
    if args.out is None:
        args.out = _latest_to_resume()
    recorded = _recorded(args.out)
    if recorded is None:
        return args
    given = given_options(argv) | args.from_run_file
    for kind in KINDS:
        _restore_models(args, kind, recorded.get(kind.recorded), given)
    _restore_key(args, recorded, given)
    if isinstance(recorded.get("scenarios"), list) and not args.paths:
        args.scenarios = recorded["scenarios"]  # a run from Python lists its scenarios
    if isinstance(recorded.get("config_file"), str) and args.config is None:
        args.config = recorded["config_file"]  # as the spec names it: its models came back above
    for option in RECORDED:
        if option.restore is None or option.recorded not in recorded:
            continue
        if given.intersection(flags(option)):
            continue
        if option.positional and getattr(args, option.dest):  # paths given
            continue
        try:
            setattr(args, option.dest, option.restore(recorded[option.recorded]))
        except (TypeError, ValueError, AttributeError):
            continue  # not a value of ours: the resume check names the difference
    return args


def _restore_models(
    args: argparse.Namespace, kind: ModelKind, models: Any, given: set[str]
) -> None:
    """The models of ``kind`` as recorded: the settings of the kind's own model
    where the command line does not give them again (a given one is
    compared), and the run file's named ones, when it is not given again."""
    if not isinstance(models, dict):
        return
    own = models.get(kind.name)
    for field, attribute, options in flags_of(kind.name):
        if isinstance(own, dict) and field in own and not given.intersection(options):
            setattr(args, attribute, own[field])
    if any(isinstance(s, kind.settings) for s in (args.named_models or {}).values()):
        return  # the run file gave them again
    try:
        named = {name: kind.settings(**fields) for name, fields in models.items()
                 if name != kind.name}  # fmt: skip
    except (TypeError, ValueError):
        return  # not ours: the policy check names what is missing
    args.named_models = {**(args.named_models or {}), **named}


def _restore_key(args: argparse.Namespace, recorded: dict[str, Any], given: set[str]) -> None:
    """Where the flags' own LLM's key was read from (never the key itself)."""
    llms = recorded.get("llms")
    own = llms.get("llm") if isinstance(llms, dict) else None
    if isinstance(own, dict) and own.get("api_key_env") and "--llm-api-key" not in given:
        args.llm_api_key_env = own["api_key_env"]


def _latest_to_resume() -> Path:

    folder = latest_run()
    if folder is None:
        raise CLIError(f"--resume: no run to continue in {LATEST}; pass --out DIR", code=2)
    return folder


def _recorded(out: Path) -> dict[str, Any] | None:
    """The folder's run record, checked against its schema before anything is
    taken from it (None: there is none)."""
    return RunFolder(out).read_record()
