"""The run configuration of ``run`` and ``eval``, built once from their arguments."""

from __future__ import annotations

import argparse
import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from chaosops.agents.hf.settings import HFSettings
from chaosops.agents.llm.settings import LLMSettings
from chaosops.runs.config import Deadlines, RunConfig, Telemetry, log_target
from chaosops.runs.options import HF_FLAGS, LLM_FLAGS
from chaosops.runs.policies import known_policy, unknown_policy

from ._errors import CLIError
from ._folders import folder_name
from ._run_file import apply_run_file


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The frozen configuration of ``chaosops run`` or ``chaosops eval``; refuses
    (:class:`CLIError`) a policy that names nothing there is."""
    if args.command == "run":
        policies = [args.policy]
    else:
        policies = list(dict.fromkeys(args.policies or ()))
    named_llms, named_hf = args.named_llms or {}, args.named_hf or {}
    check_policies(policies, args.role_policy, {**named_llms, **named_hf})
    config = dataclasses.replace(
        _config(args, policies),
        named_llms=tuple(named_llms.items()),
        named_hf=tuple(named_hf.items()),
        config_file=None if args.config is None else str(args.config),
        name=args.name,
    )
    if config.hf is None and "hf" in [*policies, *dict(args.role_policy).values()]:
        raise CLIError("--policy hf: name the model with --hf-model PATH_OR_NAME (or [hf.hf] "
                       "in the run file)")  # fmt: skip
    return config


def check_policies(
    policies: Sequence[str], role_policies: Sequence[tuple[str, str]], named: Mapping[str, Any]
) -> None:

    for option, name in [
        *(("--policy", p) for p in policies),
        *((f"--role-policy {role}=", p) for role, p in role_policies),
    ]:
        if not known_policy(name, named):
            shown = f"{option}{name}" if option.endswith("=") else f"{option} {name}"
            raise CLIError(f"{shown}: {unknown_policy(name, named)}")


def _config(args: argparse.Namespace, policies: Sequence[str]) -> RunConfig:
    return RunConfig(
        command=args.command,
        policies=tuple(policies),
        out=args.out,
        point_latest=args.point_latest,
        role_policies=tuple(dict(args.role_policy).items()),
        paths=tuple(args.paths),
        episodes_per_type=args.episodes_per_type,
        seed_offset=args.seed_offset,
        tiers=tuple(dict.fromkeys(args.tier)),
        failure_types=tuple(dict.fromkeys(args.failure_type)),
        limit=args.limit,
        concurrency=args.concurrency,
        deadlines=Deadlines(args.turn_timeout, tuple(args.role_timeout)),
        llm=llm_settings_of(args),
        hf=hf_settings_of(args),
        llm_max_failures=args.llm_max_failures,
        max_policy_errors=args.max_policy_errors,
        samples=args.samples or 1,
        scenarios=tuple(args.scenarios or ()),
        telemetry=Telemetry(
            log_json=_log_target(args),
            metrics_port=args.metrics_port,
            metrics_host=args.metrics_host,
            metrics_linger=args.metrics_linger,
            otlp_endpoint=args.otlp_endpoint,
        ),
        progress=not args.no_progress,
        ray=args.ray,
        workers=args.workers,
        resume=args.resume,
        fsync=args.fsync,
        json=args.json,
        chart=args.chart,
        draw_chart=not args.no_chart,
    )


def _log_target(args: argparse.Namespace) -> str | None:
    """``--log-json`` of ``run`` and ``eval``: see :func:`log_target`."""
    return log_target(args.log_json, args.out if args.command == "run" else None)


def llm_settings_of(args: argparse.Namespace) -> LLMSettings:
    """The flags' own LLM: each LLM option's value under its settings' key."""
    given = {key: getattr(args, dest) for key, dest, _ in LLM_FLAGS}
    # --llm-top-logprobs implies --llm-logprobs (servers reject it alone)
    given["logprobs"] = given["logprobs"] or given["top_logprobs"] is not None
    return LLMSettings(**given, api_key=args.llm_api_key, api_key_env=args.llm_api_key_env)


def hf_settings_of(args: argparse.Namespace) -> HFSettings | None:
    """The flags' own local model (None without ``--hf-model``)."""
    given = {key: getattr(args, dest) for key, dest, _ in HF_FLAGS}
    return None if given["model"] is None else HFSettings(**given)


def eval_entries(args: argparse.Namespace, argv: Sequence[str]) -> list[RunConfig]:
    """The entries ``chaosops eval`` compares, each a ``run`` configuration with
    a folder of its own under ``--out``: each ``--config`` file (named by its
    ``name``, else its stem), then each policy of ``--policies`` (default
    random, heuristic, oracle when no run file is given), ``--role-policy``
    over each. Refuses two entries of one name."""

    policies = args.policies
    if policies is None:
        policies = [] if args.config else ["random", "heuristic", "oracle"]
    named = [(path, None) for path in args.config] + [(None, p) for p in dict.fromkeys(policies)]
    entries: list[RunConfig] = []
    for path, policy in named:
        entry = copy.copy(args)
        entry.command, entry.config, entry.name = "run", path, None
        entry.policy = policy or "heuristic"
        entry.role_policy = list(args.role_policy)
        if path is not None:
            entry = apply_run_file(entry, argv)
            entry.name = entry.name or folder_name(path.stem)
        config = config_from_args(entry)
        config = dataclasses.replace(config, out=args.out / folder_name(config.label))
        if any(other.label == config.label for other in entries):
            raise CLIError(
                f"two entries of the evaluation are named {config.label!r}; give each run "
                'file a name of its own (name = "...")'
            )
        entries.append(config)
    return entries
