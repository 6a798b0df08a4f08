"""The ``chaosops`` command: run, eval, replay, scenarios, mock-llm.

See ``docs/cli.md`` for the commands, their options and the output files.

Exit codes: 0 success; 1 a runtime failure (an unreachable LLM endpoint, an
unwritable output folder, a replay mismatch, an episode that failed); 2 bad
input (an unknown option value, a missing or invalid scenario file, an output
folder that already holds a run); 130 interrupted by Ctrl-C (SIGINT), 143 by
SIGTERM. Every error is one line on stderr, ``chaosops: error: ...``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NoReturn, TextIO

__all__ = [
    "CLIError",
    "Mismatch",
    "PlannedEpisode",
    "build_parser",
    "build_summary",
    "effective_timeout",
    "expand_episodes_per_type",
    "load_suites",
    "main",
    "policy_factory",
    "replay_records",
    "timeout_groups",
]

PROG = "chaosops"
POLICIES: tuple[str, ...] = ("random", "heuristic", "oracle", "llm")
DEFAULT_RUN_OUT = Path("runs") / "latest"
DEFAULT_EVAL_OUT = Path("runs") / "eval"
DEFAULT_EVAL_POLICIES: tuple[str, ...] = ("random", "heuristic", "oracle")
ROLES: tuple[str, ...] = ("sre", "oversight", "dev", "manager")


class CLIError(Exception):
    """A failure reported as one line ``chaosops: error: <message>``, exit ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def _one_line(text: object) -> str:
    return re.sub(r"\s*\n\s*", "; ", str(text).strip())


# ----------------------------------------------------------------- arguments


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``chaosops: error: ...``, exit 2)."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{PROG}: error: {_one_line(message)} (see '{self.prog} --help')\n")
        sys.exit(2)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _role_timeout(text: str) -> tuple[str, float]:
    role, sep, seconds = text.partition("=")
    role = role.strip().lower()
    if not sep or role not in ROLES:
        raise argparse.ArgumentTypeError(
            f"expected ROLE=SECONDS with ROLE one of {', '.join(ROLES)}, got {text!r}"
        )
    try:
        value = float(seconds)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(
            f"expected ROLE=SECONDS with a positive number of seconds, got {text!r}"
        )
    return role, value


def _policy_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    bad = [name for name in names if name not in POLICIES]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"unknown policy {', '.join(map(repr, bad)) or repr(text)}; "
            f"choose from {', '.join(POLICIES)} (comma separated)"
        )
    return names


def _add_batch_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="scenario suite files (.toml) or folders of them; default: the canonical "
        "easy, medium and hard suites",
    )
    parser.add_argument(
        "--episodes-per-type",
        type=_positive_int,
        metavar="N",
        help="replace the suites' seeds: N seeds per (failure type, tier) entry, "
        "seed = seed offset + 97*i + 31*r as in scenarios_for_tier",
    )
    parser.add_argument(
        "--seed-offset",
        type=_int,
        default=0,
        metavar="N",
        help="added to every seed (default 0)",
    )
    parser.add_argument(
        "--concurrency",
        type=_positive_int,
        default=64,
        metavar="N",
        help="episodes in flight at once (>= 1, default 64)",
    )
    parser.add_argument(
        "--turn-timeout",
        type=_seconds,
        metavar="SECONDS",
        help="deadline of every turn (default: none; suites may set per-role ones)",
    )
    parser.add_argument(
        "--role-timeout",
        type=_role_timeout,
        action="append",
        default=[],
        metavar="ROLE=SECONDS",
        help="deadline of one role's turns (repeatable), e.g. --role-timeout dev=2.5",
    )
    parser.add_argument(
        "--log-json",
        metavar="PATH",
        help="write structured JSON logs to PATH ('-' for stdout; the table then goes to stderr)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    llm = parser.add_argument_group("LLM policy (--policy llm)")
    llm.add_argument(
        "--llm-base-url",
        "--base-url",
        default=os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1"),
        metavar="URL",
        help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL or "
        "http://127.0.0.1:8000/v1, the mock-llm default)",
    )
    llm.add_argument(
        "--llm-model",
        "--model",
        default="chaosops-mock",
        metavar="NAME",
        help="model name (default chaosops-mock, the mock-llm's)",
    )
    llm.add_argument(
        "--llm-api-key",
        default=None,
        metavar="KEY",
        help="API key (default $OPENAI_API_KEY); never printed or written",
    )
    llm.add_argument(
        "--llm-max-in-flight",
        type=_positive_int,
        default=64,
        metavar="N",
        help="requests in flight at once, across all episodes (default 64)",
    )
    llm.add_argument("--temperature", type=_non_negative, default=0.0, help="sampling temperature")
    llm.add_argument(
        "--max-tokens", type=_positive_int, default=256, metavar="N", help="completion limit"
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``chaosops`` command."""
    parser = _Parser(
        prog=PROG,
        description="Run, evaluate and replay ChaosOps incident-response episodes.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run scenario suites with one policy",
        description="Run scenario suites with one policy; write results.jsonl, "
        "trajectories.jsonl and summary.json to the output folder; print the table.",
    )
    _add_batch_options(run)
    run.add_argument(
        "--policy",
        choices=POLICIES,
        default="heuristic",
        help="policy playing the four roles (default heuristic)",
    )
    run.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_RUN_OUT,
        metavar="DIR",
        help=f"output folder (default {DEFAULT_RUN_OUT})",
    )
    run.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out: skip episodes already in results.jsonl",
    )
    run.add_argument(
        "--fsync", action="store_true", help="fsync after every episode (power-loss safety)"
    )

    ev = sub.add_parser(
        "eval",
        help="evaluation table across policies and tiers",
        description="Run several policies over the suites and print the evaluation table "
        "(SPEC section 13); write it as JSON and a PNG chart when matplotlib is installed.",
    )
    _add_batch_options(ev)
    ev.add_argument(
        "--policies",
        type=_policy_list,
        default=list(DEFAULT_EVAL_POLICIES),
        metavar="LIST",
        help="comma-separated policies (default random,heuristic,oracle)",
    )
    ev.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_EVAL_OUT,
        metavar="DIR",
        help=f"folder for eval.json and eval_reward_by_tier.png (default {DEFAULT_EVAL_OUT})",
    )
    ev.add_argument("--json", metavar="PATH", help="write the JSON table here ('-' for stdout)")
    ev.add_argument("--chart", metavar="PATH", help="write the PNG chart here")
    ev.add_argument("--no-chart", action="store_true", help="do not draw the chart")

    rp = sub.add_parser(
        "replay",
        help="replay recorded actions and check every reward",
        description="Replay every episode of a results.jsonl through a fresh environment "
        "and report each step whose reward or done flag differs (exit 1 if any).",
    )
    rp.add_argument("results", metavar="RESULTS", help="results.jsonl or a run folder")

    sc = sub.add_parser(
        "scenarios",
        help="list and validate scenario suites",
        description="List scenario suites and validate them (default: the canonical suites).",
    )
    sc.add_argument("paths", nargs="*", metavar="PATH", help="suite files or folders")

    # listed for --help; its options are parsed by _cmd_mock_llm
    sub.add_parser("mock-llm", help="local OpenAI-compatible server for demos and tests")
    return parser


# ------------------------------------------------------------------ scenarios


@dataclasses.dataclass(frozen=True)
class PlannedEpisode:
    """One episode to run: its scenario and the turn deadline that applies to it."""

    scenario: Any
    suite_timeout: Mapping[Any, float] | None = None


def _tier_pools() -> dict[str, list[str]]:
    from chaosops.curriculum.generator import TIER_POOLS

    return {tier.value: [ft.value for ft in pool] for tier, pool in TIER_POOLS.items()}


def _suite_files(paths: Sequence[str]) -> list[Path]:
    from chaosops.scenarios import canonical_suite_paths

    if not paths:
        return [Path(p) for p in canonical_suite_paths()]
    files: list[Path] = []
    for text in paths:
        path = Path(text)
        if not path.exists():
            raise CLIError(
                f"no such scenario file or folder: {text} "
                "(expected a .toml suite file or a folder of them)"
            )
        if path.is_dir():
            found = sorted(p for p in path.glob("*.toml") if p.is_file())
            if not found:
                raise CLIError(f"folder {text} holds no .toml suite files")
            files.extend(found)
        else:
            files.append(path)
    return files


def load_suites(paths: Sequence[str]) -> list[Any]:
    """The suites named on the command line (default: the canonical ones).

    Raises :class:`CLIError` with the loader's one-line message on a bad file.
    """
    from chaosops.scenarios import ScenarioFileError, read_suite

    suites = []
    for path in _suite_files(paths):
        try:
            suites.append(read_suite(path))
        except ScenarioFileError as exc:
            raise CLIError(_one_line(exc)) from None
        except OSError as exc:
            raise CLIError(f"cannot read scenario file {path}: {exc.strerror or exc}") from None
    return suites


def expand_episodes_per_type(
    planned: Sequence[PlannedEpisode], episodes_per_type: int, seed_offset: int = 0
) -> list[PlannedEpisode]:
    """Replace the suites' seeds with ``episodes_per_type`` seeds per entry.

    An entry is a (failure type, tier) pair, in order of first appearance; its
    first scenario is the template (max steps, misleading logs, rogue agent,
    turn timeouts). Seeds follow ``scenarios_for_tier``: ``seed_offset + 97*i +
    31*r`` where ``i`` is the failure's position in the tier's pool (failures
    outside the pool come after it, in order of appearance), so on the
    canonical suites this gives exactly ``scenarios_for_tier(tier,
    seed_offset=..., episodes_per_type=N)`` per tier.
    """
    pools = _tier_pools()
    templates: dict[tuple[str, str], PlannedEpisode] = {}
    for item in planned:
        key = (item.scenario.failure_type.value, item.scenario.difficulty.value)
        templates.setdefault(key, item)
    extra: dict[str, list[str]] = {}
    out = []
    for (failure, tier), template in templates.items():
        pool = pools.get(tier, [])
        if failure in pool:
            i = pool.index(failure)
        else:
            others = extra.setdefault(tier, [])
            others.append(failure)
            i = len(pool) + others.index(failure)
        for r in range(episodes_per_type):
            scenario = dataclasses.replace(template.scenario, seed=seed_offset + 97 * i + 31 * r)
            out.append(PlannedEpisode(scenario, template.suite_timeout))
    return out


def _plan(args: argparse.Namespace) -> list[PlannedEpisode]:
    planned = [
        PlannedEpisode(entry.scenario, entry.turn_timeout)
        for suite in load_suites(args.paths)
        for entry in suite.entries
    ]
    if args.episodes_per_type is not None:
        return expand_episodes_per_type(planned, args.episodes_per_type, args.seed_offset)
    if args.seed_offset:
        return [
            PlannedEpisode(
                dataclasses.replace(p.scenario, seed=p.scenario.seed + args.seed_offset),
                p.suite_timeout,
            )
            for p in planned
        ]
    return planned


TurnTimeout = float | dict[Any, float] | None


def effective_timeout(
    args: argparse.Namespace, suite_timeout: Mapping[Any, float] | None
) -> TurnTimeout:
    """The deadline of one episode: ``--role-timeout`` over ``--turn-timeout``
    over the suite entry's per-role timeouts; ``None`` when nothing sets one."""
    from chaosops.env.models import AgentRole

    if args.turn_timeout is None and not args.role_timeout:
        return dict(suite_timeout) if suite_timeout else None
    if not args.role_timeout:
        return float(args.turn_timeout)
    per_role: dict[Any, float] = (
        {role: float(args.turn_timeout) for role in AgentRole}
        if args.turn_timeout is not None
        else dict(suite_timeout or {})
    )
    for role, seconds in args.role_timeout:
        per_role[AgentRole(role)] = seconds
    return per_role


def timeout_groups(
    args: argparse.Namespace, planned: Sequence[PlannedEpisode]
) -> list[tuple[list[int], TurnTimeout]]:
    """Indices of ``planned`` grouped by deadline, in order of first appearance.

    The runner takes one deadline per batch, so each group runs as its own
    batch, one after the other (with the canonical suites there is one group).
    """
    groups: dict[Any, tuple[list[int], TurnTimeout]] = {}
    for index, item in enumerate(planned):
        timeout = effective_timeout(args, item.suite_timeout)
        key = (
            tuple(sorted((getattr(k, "value", k), v) for k, v in timeout.items()))
            if isinstance(timeout, dict)
            else timeout
        )
        groups.setdefault(key, ([], timeout))[0].append(index)
    return list(groups.values())


# -------------------------------------------------------------------- policies


class _Secret:
    """Scrubs the API key out of any text we print."""

    def __init__(self, value: str | None) -> None:
        self.value = value or None

    def scrub(self, text: str) -> str:
        return text.replace(self.value, "***") if self.value else text


def _api_key(args: argparse.Namespace) -> str | None:
    return args.llm_api_key or os.environ.get("OPENAI_API_KEY") or None


def _build_llm(args: argparse.Namespace) -> Any:
    from chaosops.agents.llm import LLMPolicy

    return LLMPolicy(
        base_url=args.llm_base_url,
        model=args.llm_model,
        api_key=_api_key(args),
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        max_in_flight=args.llm_max_in_flight,
    )


async def _check_llm(args: argparse.Namespace) -> None:
    from chaosops.agents.llm import LLMEndpointError, check_endpoint

    secret = _Secret(_api_key(args))
    try:
        await check_endpoint(
            base_url=args.llm_base_url, model=args.llm_model, api_key=_api_key(args)
        )
    except LLMEndpointError as exc:
        raise CLIError(secret.scrub(_one_line(exc)), code=1) from None


def policy_factory(name: str, llm: Any = None) -> Callable[[Any], Mapping[Any, Any]]:
    """Role maps per scenario (SPEC section 13): one policy object for the four roles.

    random and heuristic are seeded with the scenario's seed, oracle gets its
    failure type; ``llm`` is one shared :class:`LLMPolicy` (its in-flight limit
    then holds across the whole batch).
    """
    from chaosops.agents.policies import heuristic_policy, oracle_policy, random_policy
    from chaosops.env.models import AgentRole

    roles = tuple(AgentRole)
    if name == "llm":
        if llm is None:
            raise ValueError("policy_factory('llm') needs the LLM policy")
        shared = {role: llm for role in roles}
        return lambda scenario: shared

    def factory(scenario: Any) -> Mapping[Any, Any]:
        if name == "random":
            policy = random_policy(seed=scenario.seed)
        elif name == "heuristic":
            policy = heuristic_policy(seed=scenario.seed)
        elif name == "oracle":
            policy = oracle_policy(scenario.failure_type)
        else:
            raise ValueError(f"unknown policy {name!r}")
        return {role: policy for role in roles}

    return factory


# -------------------------------------------------------------- progress, io


class _Progress:
    """A rich progress bar on stderr: done/total, in flight, timeouts, errors, rate."""

    def __init__(self, *, enabled: bool, total: int, concurrency: int, label: str) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.total = total
        self.concurrency = concurrency
        self.done = 0
        self.timeouts = 0
        self.errors = 0
        self.failed = 0
        self.started = time.monotonic()
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[stats]}"),
            console=Console(stderr=True),
            disable=not enabled,
            refresh_per_second=4,
        )
        self._task = self._progress.add_task(label, total=total, stats=self._stats())

    def _stats(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        in_flight = min(self.concurrency, self.total - self.done)
        text = (
            f"in flight {in_flight} · timeouts {self.timeouts} · errors {self.errors}"
            f" · {self.done / elapsed:.1f} ep/s"
        )
        if self.failed:
            text += f" · failed {self.failed}"
        return text

    def __enter__(self) -> _Progress:
        self.started = time.monotonic()
        self._progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._progress.update(self._task, stats=self._stats())
        self._progress.stop()

    def advance(self, result: Any) -> None:
        self.done += 1
        self.timeouts += int(result.timeouts)
        self.errors += int(result.errors)
        self.failed += int(result.status != "ok")
        self._progress.update(self._task, advance=1, stats=self._stats())


def _console(stream: TextIO) -> Any:
    from rich.console import Console

    width = None if stream.isatty() else 160
    return Console(file=stream, width=width, highlight=False)


def _configure_logs(args: argparse.Namespace) -> TextIO:
    """Configure JSON logs; return the stream for tables and notes."""
    if not args.log_json:
        return sys.stdout
    from actors import configure_logging

    if args.log_json == "-":
        configure_logging(sys.stdout, pretty=False)
        return sys.stderr
    path = Path(args.log_json)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise CLIError(
            f"cannot write the log file {args.log_json}: {exc.strerror or exc}", code=1
        ) from None
    configure_logging(path, pretty=False)
    return sys.stdout


def _note(text: str) -> None:
    sys.stderr.write(f"{PROG}: {text}\n")
    sys.stderr.flush()


# ------------------------------------------------------------ batch execution


@dataclasses.dataclass
class _Stop:
    """Which signal stopped the batch, if any."""

    signum: int | None = None


@dataclasses.dataclass
class _Batch:
    """One call to the runner: scenarios sharing a deadline, with their plan indices."""

    scenarios: list[Any]
    indices: list[int]
    factory: Callable[[Any], Mapping[Any, Any]]
    turn_timeout: TurnTimeout
    tag: str = ""


def _batches(
    args: argparse.Namespace,
    planned: Sequence[PlannedEpisode],
    todo: Sequence[int],
    factory: Callable[[Any], Mapping[Any, Any]],
    tag: str = "",
) -> list[_Batch]:
    wanted = set(todo)
    batches = []
    for indices, timeout in timeout_groups(args, planned):
        kept = [i for i in indices if i in wanted]
        if kept:
            scenarios = [planned[i].scenario for i in kept]
            batches.append(_Batch(scenarios, kept, factory, timeout, tag))
    return batches


async def _watch_signals(scope: Any, stop: _Stop) -> None:
    import anyio

    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            stop.signum = int(signum)
            scope.cancel()
            return


async def _run_batches(
    batches: Sequence[_Batch],
    *,
    concurrency: int,
    on_result: Callable[[_Batch, int, Any], None],
    close: Sequence[Any] = (),
) -> _Stop:
    """Run the batches one after the other, calling ``on_result(batch, plan_index,
    result)`` as each episode finishes.

    SIGINT or SIGTERM cancels the batch in flight (its episodes are cancelled by
    structured cancellation); what finished was already handed to ``on_result``.
    The objects in ``close`` (LLM policies) are closed at the end, in this loop.
    """
    import anyio

    from chaosops.agents.runner import open_batch

    stop = _Stop()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_signals, tg.cancel_scope, stop)
            for batch in batches:
                async with open_batch(
                    batch.scenarios,
                    batch.factory,
                    concurrency=concurrency,
                    turn_timeout=batch.turn_timeout,
                ) as results:
                    async for index, result in results:
                        on_result(batch, batch.indices[index], result)
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            for resource in close:
                await resource.aclose()
    return stop


def _stop_code(stop: _Stop) -> int:
    return 128 + (stop.signum or signal.SIGINT)


# --------------------------------------------------------------------- run


def build_summary(records: Sequence[Mapping[str, Any]], planned: Sequence[str]) -> dict[str, Any]:
    """The content of ``summary.json``: totals and the evaluation rows.

    Derived from the results records only (no timestamps or wall times), so a
    resumed run ends with the same summary as an uninterrupted one.
    """
    from chaosops.evaluation import evaluate_records, rows_to_json

    done = {r["run_key"] for r in records}
    missing = [key for key in planned if key not in done]
    return {
        "episodes": len(records),
        "resolved": sum(1 for r in records if r.get("resolved")),
        "failed": sum(1 for r in records if r.get("status") != "ok"),
        "timeouts": sum(int(r.get("timeouts", 0)) for r in records),
        "errors": sum(int(r.get("errors", 0)) for r in records),
        "planned": len(planned),
        "missing": len(missing),
        "complete": not missing,
        "rows": rows_to_json(evaluate_records(records)),
    }


def _prepare_llm(args: argparse.Namespace, policies: Iterable[str]) -> Any:
    if "llm" not in policies:
        return None
    import anyio

    anyio.run(_check_llm, args)
    return _build_llm(args)


def _cmd_run(args: argparse.Namespace) -> int:
    import anyio

    from chaosops.evaluation import evaluate_records, render_table
    from chaosops.outputs import OutputError, RunOutputs, plan_keys

    planned = _plan(args)
    keys = plan_keys(args.policy, [p.scenario for p in planned])
    llm = _prepare_llm(args, [args.policy])
    factory = policy_factory(args.policy, llm)
    render = _renderer()

    outputs = RunOutputs(args.out, resume=args.resume, fsync=args.fsync)
    try:
        state = outputs.open()
    except OutputError as exc:
        raise CLIError(str(exc), code=2 if exc.usage else 1) from None
    try:
        table_stream = _configure_logs(args)
        if args.resume:
            _note(
                f"resuming {args.out}: {len(state.done_keys & set(keys))} of {len(keys)} "
                "episodes already done"
                + (", torn last results line dropped" if state.torn_results_line else "")
            )
        todo = [i for i, key in enumerate(keys) if key not in state.done_keys]
        progress = _Progress(
            enabled=not args.no_progress,
            total=len(todo),
            concurrency=args.concurrency,
            label=args.policy,
        )

        def on_result(batch: _Batch, index: int, result: Any) -> None:
            outputs.write_episode(result, policy=args.policy, key=keys[index], render=render)
            progress.advance(result)

        batches = _batches(args, planned, todo, factory)
        with progress:
            stop = anyio.run(
                partial(
                    _run_batches,
                    batches,
                    concurrency=args.concurrency,
                    on_result=on_result,
                    close=[llm] if llm is not None else [],
                )
            )
        records = outputs.records()
        summary = build_summary(records, keys)
        outputs.write_summary(summary)
    except OSError as exc:
        raise CLIError(f"cannot write to {args.out}: {exc.strerror or exc}", code=1) from None
    finally:
        outputs.close()

    if stop.signum is not None:
        _note(
            f"interrupted: {progress.done} episode(s) finished this run, kept in "
            f"{outputs.results_path}; run again with --resume to finish"
        )
        return _stop_code(stop)
    console = _console(table_stream)
    console.print(render_table(evaluate_records(records), title=f"chaosops run: {args.out}"))
    _note(f"wrote {outputs.results_path}, {outputs.trajectories_path}, {outputs.summary_path}")
    if summary["failed"]:
        _note(f"{summary['failed']} episode(s) failed (see 'error' in {outputs.results_path})")
        return 1
    return 0


def _renderer() -> Callable[[Any, Any], Any] | None:
    try:
        from chaosops.agents.llm.render import build_messages
    except ImportError:  # pragma: no cover - the LLM package is part of chaosops
        return None
    return build_messages


# --------------------------------------------------------------------- eval


def _cmd_eval(args: argparse.Namespace) -> int:
    import anyio
    import orjson

    from chaosops.evaluation import (
        evaluate_records,
        render_table,
        rows_to_json,
        write_reward_chart,
    )
    from chaosops.outputs import atomic_write_bytes, plan_keys, result_record

    if args.json == "-" and args.log_json == "-":
        raise CLIError("--json - and --log-json - both write to stdout; send one to a file")
    policies = list(dict.fromkeys(args.policies))
    planned = _plan(args)
    scenarios = [p.scenario for p in planned]
    llm = _prepare_llm(args, policies)
    table_stream = _configure_logs(args)
    if args.json == "-":
        table_stream = sys.stderr

    keys = {name: plan_keys(name, scenarios) for name in policies}
    batches = [
        batch
        for name in policies
        for batch in _batches(
            args, planned, range(len(planned)), policy_factory(name, llm), tag=name
        )
    ]
    by_policy: dict[str, dict[int, dict[str, Any]]] = {name: {} for name in policies}
    progress = _Progress(
        enabled=not args.no_progress,
        total=len(planned) * len(policies),
        concurrency=args.concurrency,
        label="eval",
    )

    def on_result(batch: _Batch, index: int, result: Any) -> None:
        record = result_record(result, policy=batch.tag, key=keys[batch.tag][index])
        by_policy[batch.tag][index] = record
        progress.advance(result)

    with progress:
        stop = anyio.run(
            partial(
                _run_batches,
                batches,
                concurrency=args.concurrency,
                on_result=on_result,
                close=[llm] if llm is not None else [],
            )
        )
    if stop.signum is not None:
        _note("interrupted; no evaluation written")
        return _stop_code(stop)

    records = [done[i] for name in policies for done in [by_policy[name]] for i in sorted(done)]
    rows = evaluate_records(records)
    _console(table_stream).print(render_table(rows, title="chaosops eval"))
    payload = {
        "policies": policies,
        "episodes_per_policy": len(planned),
        "rows": rows_to_json(rows),
    }
    data = orjson.dumps(payload, option=orjson.OPT_INDENT_2) + b"\n"
    try:
        if args.json == "-":
            sys.stdout.write(data.decode())
            sys.stdout.flush()
        else:
            json_path = Path(args.json) if args.json else args.out / "eval.json"
            json_path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(json_path, data)
            _note(f"wrote {json_path}")
        if not args.no_chart:
            chart = Path(args.chart) if args.chart else args.out / "eval_reward_by_tier.png"
            chart.parent.mkdir(parents=True, exist_ok=True)
            if write_reward_chart(rows, chart):
                _note(f"wrote {chart}")
            else:
                _note("matplotlib is not installed; no chart (pip install 'chaosops[plot]')")
    except OSError as exc:
        raise CLIError(f"cannot write the evaluation: {exc.strerror or exc}", code=1) from None
    return 0


# ------------------------------------------------------------------- replay


@dataclasses.dataclass
class Mismatch:
    """One replayed step (or episode end) that differs from the record."""

    episode_id: str
    run_key: str
    step: int
    what: str

    def line(self) -> str:
        """The report line: episode id, run key, step and what differs."""
        return f"episode {self.episode_id} ({self.run_key}) step {self.step}: {self.what}"


def replay_records(records: Iterable[Mapping[str, Any]]) -> tuple[int, int, list[Mismatch]]:
    """Replay recorded actions; return (episodes, steps, mismatches).

    Each record's scenario is reset in a fresh ``ChaosOpsEnvironment`` and its
    applied actions are stepped in order; a step whose role, reward or done
    flag differs is a mismatch, and so are a final resolved flag or
    cumulative reward that differ (episodes that failed are checked step by
    step only).
    """
    from chaosops.env.environment import ChaosOpsEnvironment
    from chaosops.env.models import ChaosOpsAction
    from chaosops.outputs import scenario_from_record

    episodes = steps = 0
    mismatches: list[Mismatch] = []
    for record in records:
        episodes += 1
        ep_id = str(record.get("episode_id"))
        key = str(record.get("run_key"))
        env = ChaosOpsEnvironment()
        try:
            env.reset(scenario=scenario_from_record(record))
        except (KeyError, ValueError, TypeError) as exc:
            mismatches.append(Mismatch(ep_id, key, 0, f"cannot rebuild the scenario: {exc}"))
            continue
        done = False
        for number, step in enumerate(record.get("steps") or (), start=1):
            steps += 1
            if done:
                mismatches.append(Mismatch(ep_id, key, number, "recorded after the episode ended"))
                break
            try:
                action = ChaosOpsAction.model_validate(step["action"])
            except (KeyError, ValueError) as exc:
                mismatches.append(Mismatch(ep_id, key, number, f"unreadable action: {exc}"))
                break
            if str(step.get("role")) != env.current_role.value:
                mismatches.append(
                    Mismatch(
                        ep_id,
                        key,
                        number,
                        f"role recorded {step.get('role')}, replayed {env.current_role.value}",
                    )
                )
            obs = env.step(action)
            recorded = float(step.get("reward", math.nan))
            replayed = float(obs.reward or 0.0)
            if not math.isclose(recorded, replayed, rel_tol=1e-9, abs_tol=1e-9):
                mismatches.append(
                    Mismatch(ep_id, key, number, f"reward recorded {recorded}, replayed {replayed}")
                )
            if bool(step.get("done")) != bool(obs.done):
                mismatches.append(
                    Mismatch(
                        ep_id, key, number, f"done recorded {step.get('done')}, replayed {obs.done}"
                    )
                )
            done = bool(obs.done)
        if record.get("status", "ok") != "ok":
            continue
        state = env.state
        final = len(record.get("steps") or ())
        if bool(record.get("resolved")) != bool(state.resolved):
            mismatches.append(
                Mismatch(
                    ep_id,
                    key,
                    final,
                    f"resolved recorded {record.get('resolved')}, replayed {state.resolved}",
                )
            )
        recorded_total = float(record.get("cumulative_reward", math.nan))
        if not math.isclose(recorded_total, state.cumulative_reward, rel_tol=1e-9, abs_tol=1e-9):
            mismatches.append(
                Mismatch(
                    ep_id,
                    key,
                    final,
                    f"cumulative reward recorded {recorded_total}, "
                    f"replayed {state.cumulative_reward}",
                )
            )
    return episodes, steps, mismatches


def _cmd_replay(args: argparse.Namespace) -> int:
    from chaosops.outputs import OutputError, read_results

    path = Path(args.results)
    if not path.exists():
        raise CLIError(
            f"no such results file or run folder: {args.results} "
            "(expected results.jsonl or a folder holding one)"
        )
    try:
        records, torn = read_results(path)
    except OutputError as exc:
        raise CLIError(str(exc), code=2 if exc.usage else 1) from None
    if torn:
        _note("ignored a torn last line (the run was killed while writing it)")
    episodes, steps, mismatches = replay_records(records)
    for mismatch in mismatches:
        print(mismatch.line())
    bad = len({m.episode_id for m in mismatches})
    if mismatches:
        print(
            f"replay: {bad} of {episodes} episodes differ "
            f"({len(mismatches)} mismatches over {steps} steps)"
        )
        return 1
    print(f"replay: {episodes} episodes, {steps} steps, every reward matches")
    return 0


# ---------------------------------------------------------------- scenarios


def _cmd_scenarios(args: argparse.Namespace) -> int:
    from rich.table import Table

    from chaosops.evaluation import TIER_ORDER
    from chaosops.scenarios import ScenarioFileError, read_suite

    table = Table(title="scenario suites", title_justify="left")
    for header in ("suite", "file", "scenarios", "failure types", "tiers"):
        table.add_column(header, justify="right" if header == "scenarios" else "left")
    total = valid = 0
    problems: list[str] = []
    for path in _suite_files(args.paths):
        try:
            suite = read_suite(path)
        except ScenarioFileError as exc:
            problems.append(_one_line(exc))
            continue
        except OSError as exc:
            problems.append(f"cannot read scenario file {path}: {exc.strerror or exc}")
            continue
        scenarios = suite.scenarios
        valid += 1
        total += len(scenarios)
        failures = dict.fromkeys(s.failure_type.value for s in scenarios)
        tiers = sorted(
            {s.difficulty.value for s in scenarios},
            key=lambda t: (TIER_ORDER.index(t) if t in TIER_ORDER else len(TIER_ORDER), t),
        )
        table.add_row(
            suite.name, str(path), str(len(scenarios)), ", ".join(failures), ", ".join(tiers)
        )
    console = _console(sys.stdout)
    if valid:
        console.print(table)
    if problems:
        for problem in problems:
            sys.stderr.write(f"{PROG}: error: {problem}\n")
        return 2
    console.print(f"{valid} suite(s), {total} scenarios, all valid")
    return 0


# ------------------------------------------------------------------ mock-llm


def _cmd_mock_llm(argv: Sequence[str]) -> int:
    """``chaosops mock-llm``: its options come from :func:`chaosops.mock_llm.build_parser`
    (parsed here, so other commands do not pay for importing the server)."""
    import anyio

    from chaosops import mock_llm

    parser = _Parser(
        prog=f"{PROG} mock-llm",
        description="Serve POST /v1/chat/completions and GET /v1/models on loopback, "
        "answering with sensible ChaosOps actions.",
    )
    args = mock_llm.build_parser(parser).parse_args(argv)
    try:
        config = mock_llm.config_from_args(args)
    except ValueError as exc:
        errors = getattr(exc, "errors", None)
        if callable(errors):  # pydantic: name the option
            err = errors()[0]
            option = "--" + "-".join(str(part) for part in err["loc"]).replace("_", "-")
            raise CLIError(f"mock-llm {option}: {err['msg']} (got {err.get('input')!r})") from None
        raise CLIError(f"mock-llm: {_one_line(exc)}") from None

    async def serve() -> None:
        async with anyio.create_task_group() as tg:
            port = await tg.start(partial(mock_llm.serve, config, install_signal_handlers=True))
            host = f"[{config.host}]" if ":" in config.host else config.host
            print(
                f"mock LLM serving model {config.model!r} at http://{host}:{port}/v1 "
                f"(latency {config.latency}); Ctrl-C to stop",
                flush=True,
            )

    try:
        anyio.run(serve, backend="asyncio")
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        raise CLIError(
            f"mock-llm cannot bind {config.host}:{config.port}: {exc.strerror or exc}", code=1
        ) from None
    return 0


# --------------------------------------------------------------------- main

_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": _cmd_run,
    "eval": _cmd_eval,
    "replay": _cmd_replay,
    "scenarios": _cmd_scenarios,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``chaosops`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["mock-llm"]:
            return _cmd_mock_llm(argv[1:])
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            parser.error(f"missing command; choose from {', '.join([*_COMMANDS, 'mock-llm'])}")
        return _COMMANDS[args.command](args)
    except CLIError as exc:
        sys.stderr.write(f"{PROG}: error: {_one_line(exc)}\n")
        return exc.code
    except KeyboardInterrupt:
        _note("interrupted")
        return 130
    except BrokenPipeError:
        # stdout closed by a pager or `head`: nothing more to say.
        sys.stderr.close()
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
