"""The run configuration of ``run`` and ``eval``, built once from their arguments."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from chaosops.runs.config import RunConfig, Telemetry, log_target
from chaosops.runs.kinds import KIND_NAMES, KINDS
from chaosops.runs.policies import known_policy, unknown_policy
from chaosops.runs.spec import Deadlines, RunSpec

from ._errors import CLIError, refusal_text
from ._flags import flags_of
from ._folders import folder_name
from ._run_file import apply_run_file


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The frozen configuration of ``chaosops run`` or ``chaosops eval``; refuses
    (:class:`CLIError`) a policy that names nothing there is."""
    if args.command == "run":
        policies = [args.policy]
    else:
        policies = list(dict.fromkeys(args.policies or ()))
    check_policies(policies, args.role_policy, args.named_models or {})
    config = _config(args, policies)
    for name in [*policies, *dict(args.role_policy).values()]:
        if name in KIND_NAMES and config.spec.model_settings(name) is None:
            flag = next(flags[0] for key, _, flags in flags_of(name) if key == "model")
            raise CLIError(f"--policy {name}: name the model with {flag} PATH_OR_NAME "
                           f"(or [{name}.{name}] in the run file)")  # fmt: skip
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
        spec=spec_of(args, policies),
        out=args.out,
        point_latest=args.point_latest,
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


def spec_of(args: argparse.Namespace, policies: Sequence[str]) -> RunSpec:
    """The spec of a run, from its merged arguments: what run.json records."""
    return RunSpec(
        policies=tuple(policies),
        role_policies=tuple(dict(args.role_policy).items()),
        name=args.name,
        paths=tuple(args.paths or ()),  # serve has no suites
        episodes_per_type=args.episodes_per_type,
        seed_offset=args.seed_offset,
        tiers=tuple(dict.fromkeys(args.tier)),
        failure_types=tuple(dict.fromkeys(args.failure_type)),
        limit=args.limit,
        samples=args.samples or 1,
        scenarios=tuple(args.scenarios or ()),
        deadlines=Deadlines(args.turn_timeout, tuple(args.role_timeout)),
        models=models_of(args),
        concurrency=args.concurrency,
        llm_max_failures=args.llm_max_failures,
        max_policy_errors=args.max_policy_errors,
        config_file=None if args.config is None else str(args.config),
    )


def _log_target(args: argparse.Namespace) -> str | None:
    """``--log-json`` of ``run`` and ``eval``: see :func:`log_target`."""
    return log_target(args.log_json, args.out if args.command == "run" else None)


def _in_flags(exc: ValueError, flags: Sequence[tuple[str, str, Sequence[str]]]) -> str:
    """A settings object's refusal, its fields named by their flags."""
    text = refusal_text(exc)
    for key, _, names in sorted(flags, key=lambda f: -len(f[0])):
        text = re.sub(rf"(?<![\w-]){re.escape(key)}\b", names[0], text)
    return text


def models_of(args: argparse.Namespace) -> tuple[tuple[str, Any], ...]:
    """Every model a policy name names: each kind's own, from its flags (when
    they name a model), then the run file's (``args.named_models``)."""
    own = []
    for kind in KINDS:
        flags = flags_of(kind.name)
        try:
            settings = kind.own({key: getattr(args, dest) for key, dest, _ in flags})
        except ValueError as exc:  # settings that do not go together: each flag was valid
            raise CLIError(_in_flags(exc, flags)) from None
        if settings is not None and kind.name == "llm":  # a key: the flag's, or a variable's
            settings = dataclasses.replace(
                settings, api_key=args.llm_api_key, api_key_env=args.llm_api_key_env
            )
        if settings is not None:
            own.append((kind.name, settings))
    return (*own, *(args.named_models or {}).items())


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
        label = config.spec.label
        config = dataclasses.replace(config, out=args.out / folder_name(label))
        if any(other.spec.label == label for other in entries):
            raise CLIError(
                f"two entries of the evaluation are named {label!r}; give each run "
                'file a name of its own (name = "...")'
            )
        entries.append(config)
    return entries
