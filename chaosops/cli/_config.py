"""The run configuration: everything ``run`` and ``eval`` take, built once from the arguments."""

from __future__ import annotations

import argparse
import copy
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actors.cluster import ClusterOptions
from chaosops.agents.llm.settings import LLMSettings
from chaosops.env.environment import DEFAULT_TURN_ORDER
from chaosops.env.models import AgentRole
from chaosops.outputs import LOG_FILE

from ._errors import CLIError
from ._folders import folder_name
from ._run_file import apply_run_file, known_policy, unknown_policy

TurnTimeout = float | dict[Any, float] | None
"""What one batch runs under: seconds for every role, per role, or no deadline."""


@dataclass(frozen=True, slots=True)
class Deadlines:
    """``--turn-timeout`` and ``--role-timeout``, over the suites' own."""

    turn_timeout: float | None = None
    role_timeout: tuple[tuple[str, float], ...] = ()

    def for_suite(self, suite_timeout: Mapping[Any, float] | None) -> TurnTimeout:
        """The deadline of one episode: ``--role-timeout`` over ``--turn-timeout``
        over the suite entry's per-role timeouts; ``None`` when nothing sets one."""

        if self.turn_timeout is None and not self.role_timeout:
            return dict(suite_timeout) if suite_timeout else None
        if not self.role_timeout:
            return float(self.turn_timeout)  # type: ignore[arg-type]
        per_role: dict[Any, float] = (
            {role: float(self.turn_timeout) for role in AgentRole}
            if self.turn_timeout is not None
            else dict(suite_timeout or {})
        )
        for role, seconds in self.role_timeout:
            per_role[AgentRole(role)] = seconds
        return per_role

    @property
    def longest(self) -> float | None:
        """The longest deadline the flags give a turn (None: they give none)."""
        given = [s for s in (self.turn_timeout, *dict(self.role_timeout).values()) if s is not None]
        return max(given, default=None)

    @property
    def per_role(self) -> dict[str, float] | None:
        """``--role-timeout`` as recorded in ``run.json`` (sorted; None when not given)."""
        return dict(sorted(dict(self.role_timeout).items())) or None


@dataclass(frozen=True, slots=True)
class Telemetry:
    """Where a run is watched from: JSON logs, Prometheus metrics, OpenTelemetry traces."""

    log_json: str | None = None
    metrics_port: int | None = None
    metrics_host: str | None = None
    metrics_linger: float | None = None
    otlp_endpoint: str | None = None

    @property
    def host(self) -> str:
        """The address metrics are served on."""
        return self.metrics_host or "127.0.0.1"


@dataclass(frozen=True, slots=True)
class RunConfig:
    """One ``run`` or ``eval`` of the suites: what to play, where to write, how to watch."""

    command: str
    policies: tuple[str, ...]
    out: Path
    paths: tuple[str, ...] = ()
    episodes_per_type: int | None = None
    seed_offset: int = 0
    tiers: tuple[str, ...] = ()  # --tier: only these (all when empty)
    failure_types: tuple[str, ...] = ()  # --failure-type: only these (all when empty)
    limit: int | None = None  # --limit: the first N of the plan
    concurrency: int = 64
    deadlines: Deadlines = field(default_factory=Deadlines)
    llm: LLMSettings = field(default_factory=lambda: LLMSettings(model="chaosops-mock"))
    llm_max_failures: int = 10
    max_policy_errors: int | float | None = None  # errors in a row, or a share of the turns
    samples: int = 1  # --samples: each scenario played this often
    scenarios: tuple[Any, ...] = ()  # a run from Python, resumed: the scenarios its run.json lists
    telemetry: Telemetry = field(default_factory=Telemetry)
    progress: bool = True
    resume: bool = False  # run
    fsync: bool = False  # run
    json: str | None = None  # eval: the JSON table's path, '-' for stdout
    chart: str | None = None  # eval: the chart's path
    draw_chart: bool = True  # eval
    point_latest: bool = False  # run: a folder of its own under runs/, runs/latest to it
    role_policies: tuple[tuple[str, str], ...] = ()  # --role-policy, over --policy
    named_llms: tuple[tuple[str, LLMSettings], ...] = ()  # the run file's [llm.NAME]
    config_file: str | None = None  # --config
    name: str | None = None  # --name: the outputs' policy, over the label below
    ray: str | None = None  # --ray ADDRESS: the episodes on Ray worker actors
    workers: int | None = None  # --workers: Ray worker actors (None: one per CPU)

    @property
    def cluster(self) -> Any:
        """``--ray`` and ``--workers`` as ClusterOptions; None without ``--ray``."""
        if self.ray is None:
            return None
        return ClusterOptions(self.ray, self.workers)

    @property
    def policy(self) -> str:
        """The policy of ``chaosops run`` for the roles --role-policy does not name."""
        return self.policies[0]

    @property
    def policy_by_role(self) -> dict[str, str]:
        """Each role's policy, in turn order: ``--role-policy`` over ``--policy``."""

        chosen = dict(self.role_policies)
        return {role.value: chosen.get(role.value, self.policy) for role in DEFAULT_TURN_ORDER}

    def with_llms(self, llms: Mapping[str, LLMSettings]) -> RunConfig:
        """This configuration with the settings of the LLMs in ``llms`` (by
        policy name) replaced: those the endpoints settled (``negotiated``)."""
        return dataclasses.replace(
            self,
            llm=llms.get("llm", self.llm),
            named_llms=tuple((name, llms.get(name, s)) for name, s in self.named_llms),
        )

    def llm_settings(self, name: str) -> LLMSettings | None:
        """The settings of the LLM a policy name names (``llm``: the flags'), else None."""
        return self.llm if name == "llm" else dict(self.named_llms).get(name)

    @property
    def llms_in_play(self) -> dict[str, LLMSettings]:
        """The LLMs some role plays, by policy name, in turn order."""
        chosen = {}
        for name in self.policy_by_role.values():
            if (settings := self.llm_settings(name)) is not None:
                chosen[name] = settings
        return chosen

    @property
    def players(self) -> dict[str, dict[str, str | None]]:
        """What plays each role, as the outputs record it (see :func:`players_of`)."""
        return players_of(self.policy_by_role, self.llm_settings)

    @property
    def models(self) -> str:
        """The LLM models some role asks, in turn order, joined by ``+`` (empty: none)."""
        return "+".join(dict.fromkeys(s.model for s in self.llms_in_play.values()))

    @property
    def label(self) -> str:
        """What played, as the outputs' ``policy``: ``--name``, else ``heuristic``,
        or with roles of their own ``heuristic+dev=oracle``."""
        if self.name:
            return self.name
        chosen = {role: name for role, name in self.role_policies if name != self.policy}
        own = [f"{role}={name}" for role, name in self.policy_by_role.items() if role in chosen]
        return "+".join([self.policy, *own])


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The frozen configuration of ``chaosops run`` or ``chaosops eval``; refuses
    (:class:`CLIError`) a policy that names nothing there is."""
    if args.command == "run":
        policies = [args.policy]
    else:
        policies = list(dict.fromkeys(args.policies or ()))
    named = getattr(args, "named_llms", {})
    check_policies(policies, getattr(args, "role_policy", ()), named)
    config = _config(args, policies)
    return dataclasses.replace(
        config,
        named_llms=tuple(named.items()),
        config_file=None if getattr(args, "config", None) is None else str(args.config),
        name=getattr(args, "name", None),
    )


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
        point_latest=getattr(args, "point_latest", False),
        role_policies=tuple(dict(getattr(args, "role_policy", ())).items()),
        paths=tuple(args.paths),
        episodes_per_type=args.episodes_per_type,
        seed_offset=args.seed_offset,
        tiers=tuple(dict.fromkeys(args.tier)),
        failure_types=tuple(dict.fromkeys(args.failure_type)),
        limit=args.limit,
        concurrency=args.concurrency,
        deadlines=Deadlines(args.turn_timeout, tuple(args.role_timeout)),
        llm=llm_settings_of(args),
        llm_max_failures=args.llm_max_failures,
        max_policy_errors=getattr(args, "max_policy_errors", None),
        samples=getattr(args, "samples", None) or 1,
        scenarios=tuple(getattr(args, "scenarios", None) or ()),
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
        resume=getattr(args, "resume", False),
        fsync=getattr(args, "fsync", False),
        json=getattr(args, "json", None),
        chart=getattr(args, "chart", None),
        draw_chart=not getattr(args, "no_chart", False),
    )


def _log_target(args: argparse.Namespace) -> str | None:
    """``--log-json`` of ``run`` and ``eval``: see :func:`log_target`."""
    return log_target(args.log_json, args.out if args.command == "run" else None)


def players_of(
    policy_by_role: Mapping[str, str], settings_of: Callable[[str], LLMSettings | None]
) -> dict[str, dict[str, str | None]]:
    """What plays each role, as the outputs record it: its policy and, for an
    LLM (``settings_of(policy)`` not None), its model and the answer format it
    is asked in."""
    players: dict[str, dict[str, str | None]] = {}
    for role, name in policy_by_role.items():
        settings = settings_of(name)
        players[role] = {"policy": name, "model": getattr(settings, "model", None)}
        if settings is not None:
            players[role]["answer"] = settings.answer_format or settings.answer
    return players


def log_target(log_json: str | None, folder: Path | None) -> str | None:
    """``--log-json``: ``off`` for none; a command writing a run folder (run,
    serve) writes its log into it by default, where ``chaosops watch`` and
    ``view`` find its episodes in flight."""
    if log_json == "off":
        return None
    if log_json is None and folder is not None:
        return str(Path(folder) / LOG_FILE)
    return log_json


def llm_settings_of(args: argparse.Namespace) -> LLMSettings:
    return LLMSettings(
        model=args.llm_model,
        base_url=args.llm_base_url,
        api_key=args.llm_api_key,
        api_key_env=getattr(args, "llm_api_key_env", None),
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.llm_seed,
        max_tokens=args.max_tokens,
        answer=args.llm_answer,
        system_prompt=args.llm_system_prompt,
        retries=args.llm_retries,
        history=args.llm_history,
        max_in_flight=args.llm_max_in_flight,
        max_answer_bytes=args.llm_max_answer_bytes,
        # --llm-top-logprobs implies --llm-logprobs (servers reject it alone)
        logprobs=args.llm_logprobs or args.llm_top_logprobs is not None,
        top_logprobs=args.llm_top_logprobs,
        extra_body=args.llm_extra_body,
    )


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
