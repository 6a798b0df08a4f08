"""``chaosops run --resume --out DIR`` alone: the options not given come from DIR's run.json."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chaosops.agents.hf.settings import HFSettings
from chaosops.agents.llm.settings import LLMSettings
from chaosops.outputs import RUN_RECORD
from chaosops.runs.folder import read_run_record
from chaosops.runs.options import HF_FLAGS, LLM_FLAGS, RECORDED

from ._args import given_options
from ._errors import CLIError
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
    _restore_llms(args, recorded)
    _restore_flag_llm(args, recorded, given)
    _restore_hf(args, recorded, given)
    if isinstance(recorded.get("scenarios"), list) and not args.paths:
        args.scenarios = recorded["scenarios"]  # a run from Python lists its scenarios
    for option in RECORDED:
        if option.restore is None or option.recorded not in recorded:
            continue
        if given.intersection(option.flags):
            continue
        if not option.flags and getattr(args, option.dest):  # positional paths given
            continue
        try:
            setattr(args, option.dest, option.restore(recorded[option.recorded]))
        except (TypeError, ValueError, AttributeError):
            continue  # not a value of ours: the resume check names the difference
    return args


def _restore_llms(args: argparse.Namespace, recorded: dict[str, Any]) -> None:
    """The named LLMs of a run begun with a run file, when not given again."""

    llms = recorded.get("llms")
    if args.named_llms or not isinstance(llms, dict):
        return
    try:
        args.named_llms = {
            name: LLMSettings(**fields) for name, fields in llms.items() if name != "llm"
        }
    except (TypeError, ValueError):
        args.named_llms = {}  # not ours: the policy check names what is missing


def _restore_flag_llm(args: argparse.Namespace, recorded: dict[str, Any], given: set[str]) -> None:
    """The ``llm`` policy's settings as recorded, its endpoint included, where
    the command line does not give them again (a given one is compared)."""

    llms = recorded.get("llms")
    fields = llms.get("llm") if isinstance(llms, dict) else None
    if not isinstance(fields, dict):
        return
    for field, attribute, options in LLM_FLAGS:
        if field in fields and not given.intersection(options):
            setattr(args, attribute, fields[field])
    if fields.get("api_key_env") and "--llm-api-key" not in given:
        args.llm_api_key_env = fields["api_key_env"]


def _restore_hf(args: argparse.Namespace, recorded: dict[str, Any], given: set[str]) -> None:
    """The local models as recorded: the ``hf`` policy's settings where the
    command line does not give them again, and the run file's named ones."""

    models = recorded.get("hf")
    if not isinstance(models, dict):
        return
    own = models.get("hf")
    for field, attribute, options in HF_FLAGS:
        if isinstance(own, dict) and field in own and not given.intersection(options):
            setattr(args, attribute, own[field])
    if not args.named_hf:
        try:
            args.named_hf = {name: HFSettings(**fields) for name, fields in models.items()
                             if name != "hf"}  # fmt: skip
        except (TypeError, ValueError):
            args.named_hf = {}  # not ours: the policy check names what is missing


def _latest_to_resume() -> Path:

    folder = latest_run()
    if folder is None:
        raise CLIError(f"--resume: no run to continue in {LATEST}; pass --out DIR", code=2)
    return folder


def _recorded(out: Path) -> dict[str, Any] | None:
    """The folder's run record, checked against its schema before anything is
    taken from it (None: there is none)."""
    return read_run_record(out / RUN_RECORD)
