"""``chaosops run --resume --out DIR`` alone: the options not given come from DIR's run.json."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from chaosops.agents.llm.settings import LLMSettings
from chaosops.outputs import RUN_FILE, read_object

from ._args import given_options
from ._errors import CLIError
from ._folders import LATEST, latest_run
from ._run_file import LLM_FLAGS

# The options run.json records, in the order --resume compares them: (run.json
# field, namespace attribute, its option strings, how the value is restored).
RECORDED: tuple[tuple[str, str, tuple[str, ...], Callable[[Any], Any]], ...] = (
    ("policy", "policy", ("--policy",), str),
    ("name", "name", ("--name",), lambda v: v),
    ("role_policies", "role_policy", ("--role-policy",), lambda v: list((v or {}).items())),
    ("episodes_per_type", "episodes_per_type", ("--episodes-per-type",), lambda v: v),
    ("seed_offset", "seed_offset", ("--seed-offset",), int),
    ("tiers", "tier", ("--tier",), lambda v: list(v or [])),
    ("failure_types", "failure_type", ("--failure-type",), lambda v: list(v or [])),
    ("limit", "limit", ("--limit",), lambda v: v),
    ("samples", "samples", ("--samples",), lambda v: v),
    ("paths", "paths", (), list),  # compared by what they plan: run.json's "plan"
    ("turn_timeout", "turn_timeout", ("--turn-timeout",), lambda v: v),
    ("role_timeout", "role_timeout", ("--role-timeout",), lambda v: list((v or {}).items())),
    ("llm_model", "llm_model", ("--llm-model", "--model"), str),
    ("temperature", "temperature", ("--temperature",), float),
    ("max_tokens", "max_tokens", ("--max-tokens",), int),
)


def fill_from_run_file(args: argparse.Namespace, argv: Sequence[str]) -> argparse.Namespace:
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
    given = given_options(argv) | getattr(args, "from_run_file", set())
    _restore_llms(args, recorded)
    _restore_flag_llm(args, recorded, given)
    if isinstance(recorded.get("scenarios"), list) and not args.paths:
        args.scenarios = recorded["scenarios"]  # a run from Python lists its scenarios
    for field, attribute, options, restore in RECORDED:
        if field not in recorded:
            continue
        if options and given.intersection(options):
            continue
        if not options and getattr(args, attribute):  # positional paths given
            continue
        try:
            setattr(args, attribute, restore(recorded[field]))
        except (TypeError, ValueError, AttributeError):
            continue  # not a value of ours: the resume check names the difference
    return args


def _restore_llms(args: argparse.Namespace, recorded: dict[str, Any]) -> None:
    """The named LLMs of a run begun with a run file, when not given again."""

    llms = recorded.get("llms")
    if getattr(args, "named_llms", None) or not isinstance(llms, dict):
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


def _latest_to_resume() -> Path:

    folder = latest_run()
    if folder is None:
        raise CLIError(f"--resume: no run to continue in {LATEST}; pass --out DIR", code=2)
    return folder


def _recorded(out: Path) -> dict[str, Any] | None:

    return read_object(out / RUN_FILE)
