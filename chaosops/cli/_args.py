"""The argument parser of the ``chaosops`` command and its value types."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from chaosops import __version__
from chaosops.agents.llm.policy import OWN_REQUEST_FIELDS  # only with this option
from chaosops.env.models import FailureType

from ._errors import PROG, CLIError, one_line

POLICIES: tuple[str, ...] = ("random", "heuristic", "oracle", "llm")
DEFAULT_EVAL_OUT = Path("runs") / "eval"
DEFAULT_EVAL_POLICIES: tuple[str, ...] = ("random", "heuristic", "oracle")
ROLES: tuple[str, ...] = ("sre", "oversight", "dev", "manager")


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``chaosops: error: ...``, exit 2)."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{PROG}: error: {one_line(message)} (see '{self.prog} --help')\n")
        sys.exit(2)


def _int_from(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer >= ``low`` (and <= ``high`` when given)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if high is not None and not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"expected an integer from {low} to {high}, got {text!r}"
            )
        if value < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}")
        return value

    return parse


_positive_int = _int_from(1)
_port = _int_from(0, 65535)
_non_negative_int = _int_from(0)

MAX_EPISODES_PER_TYPE = 100_000
"""The largest ``--episodes-per-type`` (as a suite entry's ``count``)."""

_episodes_per_type = _int_from(1, MAX_EPISODES_PER_TYPE)


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            f"expected a JSON object such as '{{\"return_token_ids\": true}}', got {text!r}"
        )

    if taken := sorted(OWN_REQUEST_FIELDS & set(value)):
        raise argparse.ArgumentTypeError(
            f"cannot set {', '.join(map(repr, taken))}: the LLM policy sets these itself "
            "(--llm-model for the model)"
        )
    return value


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


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return value


REPEATABLE = frozenset(
    ("--role-policy", "--role-timeout", "--tier", "--failure-type", "--config", "--refuse")
)
"""The options that may be given more than once (each adds a value)."""


def refuse_repeats(argv: Sequence[str]) -> None:
    """Refuse an option of one value given twice: the last would silently win."""
    given = Counter(arg.split("=", 1)[0] for arg in argv if arg.startswith("--"))
    for option, count in given.items():
        if count > 1 and option not in REPEATABLE:
            advice = (
                "; a role of its own: --role-policy ROLE=POLICY" if option == "--policy" else ""
            )
            raise CLIError(f"{option} is given {count} times; give it once{advice}")


def _error_limit(text: str) -> int | float:
    """``N`` (errors in a row, >= 1) or ``P%`` (a share of the turns, in (0, 100])."""
    value = text.strip()
    try:
        if value.endswith("%"):
            share = float(value[:-1]) / 100
            if 0 < share <= 1:
                return share
        elif int(value) >= 1:
            return int(value)
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(
        f"expected a count >= 1 (errors in a row) or a share such as 50%, got {text!r}"
    )


def _run_file(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a run file path (.toml), got an empty one")
    return Path(text)


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


TIERS: tuple[str, ...] = ("easy", "medium", "hard")


def _failure_type(text: str) -> str:

    accepted = [f.value for f in FailureType]
    value = text.strip().lower()
    if value not in accepted:
        raise argparse.ArgumentTypeError(
            f"unknown failure type {text!r}; choose from {', '.join(accepted)}"
        )
    return value


def _role_policy(text: str) -> tuple[str, str]:
    role, sep, policy = text.partition("=")
    role, policy = role.strip().lower(), policy.strip()
    if not sep or role not in ROLES or not policy:
        raise argparse.ArgumentTypeError(
            f"expected ROLE=POLICY with ROLE one of {', '.join(ROLES)} and POLICY one of "
            f"{', '.join(POLICIES)} or module:attribute, got {text!r}"
        )
    return role, policy


def _name(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.+=-]+", text):
        raise argparse.ArgumentTypeError(
            f"expected letters, digits and _ . + = - only, got {text!r}"
        )
    return text


def _folder(text: str) -> Path:
    """An output folder: a non-empty path (an empty one would mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a folder path, got an empty one")
    return Path(text)


def _policy_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    bad = [name for name in names if name not in POLICIES and ":" not in name]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"unknown policy {', '.join(map(repr, bad)) or repr(text)}; "
            f"choose from {', '.join(POLICIES)} or module:attribute (comma separated)"
        )
    return names


def _add_batch_options(parser: argparse.ArgumentParser) -> None:
    _add_plan_options(parser)
    _add_pacing_options(parser)
    _add_watch_options(parser)
    _add_llm_options(parser)


def _add_plan_options(parser: argparse.ArgumentParser) -> None:
    """What to play: the suites, seeds, filters and samples."""
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="scenario suite files (.toml) or folders of them; default: the canonical "
        "easy, medium and hard suites",
    )
    parser.add_argument(
        "--episodes-per-type",
        type=_episodes_per_type,
        metavar="N",
        help="replace the suites' seeds: N seeds per (failure type, tier) entry, "
        f"seed = seed offset + 97*i + 31*r as in scenarios_for_tier (1 to {MAX_EPISODES_PER_TYPE})",
    )
    parser.add_argument(
        "--seed-offset",
        type=_int,
        default=0,
        metavar="N",
        help="added to every seed (default 0); the seeds it gives must stay within 0 to 2^63-1",
    )
    parser.add_argument(
        "--tier",
        choices=TIERS,
        action="append",
        default=[],
        help="only the scenarios of this tier (repeatable)",
    )
    parser.add_argument(
        "--failure-type",
        type=_failure_type,
        action="append",
        default=[],
        metavar="TYPE",
        help="only the scenarios of this failure type (repeatable), e.g. db_deadlock",
    )
    parser.add_argument(
        "--limit",
        type=_positive_int,
        metavar="N",
        help="only the first N scenarios of the plan, after --tier and --failure-type",
    )
    parser.add_argument(
        "--samples",
        type=_int_from(1, 1000),
        default=None,
        metavar="K",
        help="play each scenario K times (1 to 1000; default 1), the scripted policies "
        "seeded anew each time; the table and summary.json then give pass@1 and pass@K",
    )


def _add_pacing_options(parser: argparse.ArgumentParser) -> None:
    """How it is played: concurrency, Ray, deadlines and when to give up."""
    parser.add_argument(
        "--concurrency",
        type=_positive_int,
        default=64,
        metavar="N",
        help="episodes in flight at once (>= 1, default 64; with --ray, in all the workers)",
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the episodes on Ray worker actors: 'local' (an instance for this run, on "
        "127.0.0.1), 'auto' or HOST:PORT (a running cluster); needs the 'ray' extra",
    )
    parser.add_argument(
        "--workers",
        type=_positive_int,
        metavar="N",
        help="Ray worker actors (default: one per CPU of the cluster); with --ray",
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
        "--max-policy-errors",
        type=_error_limit,
        default=None,
        metavar="N|P%",
        help="stop the run (exit 1, finished episodes kept for --resume) once N turns in a "
        "row failed with a policy error, any policy's, or once P%% of the turns did (judged "
        "from the 100th turn on); default: never",
    )


def _add_watch_options(parser: argparse.ArgumentParser) -> None:
    """How a run is watched: logs, metrics, traces, the progress bar."""
    parser.add_argument(
        "--log-json",
        metavar="PATH",
        help="write structured JSON logs to PATH ('-' for stdout, the table then going to "
        "stderr; 'off' for none). Default for run: OUT/log.jsonl",
    )
    parser.add_argument(
        "--metrics-port",
        type=_port,
        metavar="PORT",
        help="serve Prometheus metrics on http://HOST:PORT/metrics while the command runs "
        "(0: a free port; the address is printed)",
    )
    parser.add_argument(
        "--metrics-host",
        metavar="HOST",
        help="address the metrics are served on (default 127.0.0.1; 0.0.0.0: every interface)",
    )
    parser.add_argument(
        "--metrics-linger",
        type=_non_negative,
        metavar="SECONDS",
        help="keep serving the final metrics this long after the run (for a last scrape)",
    )
    parser.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="send OpenTelemetry traces (a span per episode and per turn) over OTLP/HTTP to "
        "URL, e.g. http://127.0.0.1:4318 (needs the otel extra; OTEL_EXPORTER_OTLP_HEADERS "
        "and OTEL_SERVICE_NAME are honoured)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_llm_options(parser: argparse.ArgumentParser) -> None:
    """The LLM policy's endpoint, sampling and limits."""
    llm = parser.add_argument_group("LLM policy (the llm policy of --policy or --policies)")
    llm.add_argument(
        "--llm-base-url",
        "--base-url",
        default=os.environ.get("OPENAI_BASE_URL") or "http://127.0.0.1:8000/v1",  # empty: unset
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
        type=_int_from(1, 100_000),
        default=64,
        metavar="N",
        help="requests in flight at once, across all episodes (1 to 100000, default 64)",
    )
    llm.add_argument(
        "--llm-max-answer-bytes",
        type=_int_from(1024, 1 << 30),
        default=1 << 20,
        metavar="N",
        help="bytes read of one answer at most (default 1 MiB): a longer one is not read "
        "further, and the turn plays the fallback with the error",
    )
    llm.add_argument(
        "--llm-max-failures",
        type=_non_negative_int,
        default=10,
        metavar="N",
        help="stop the run (exit 1, finished episodes kept for --resume) once N LLM calls "
        "in a row failed for good, retries spent: the endpoint went away (default 10; "
        "0: never stop, every such turn plays the fallback)",
    )
    _add_llm_sampling_options(llm)


def _add_llm_sampling_options(llm: Any) -> None:
    """How the LLM policy asks: sampling, answer form, retries, history, logprobs."""
    llm.add_argument("--temperature", type=_non_negative, default=0.0, help="sampling temperature")
    llm.add_argument("--top-p", type=_share, default=None, metavar="P", help="nucleus sampling")
    llm.add_argument(
        "--llm-seed", type=_int, default=None, metavar="N", help="sampling seed sent to the server"
    )
    llm.add_argument(
        "--llm-answer",
        choices=("auto", "json", "json_object", "tools", "text"),
        default="auto",
        help="how the model answers, each format but text constrained to the turn's legal "
        "moves: auto (default: the first of the next four the server accepts, probed at the "
        "start), json (response_format json_schema; OpenAI, vLLM, Ollama), json_object "
        "(response_format json_object with the schema; llama-cpp-python), tools (the "
        "take_action tool, named), text (parsed tolerantly)",
    )
    llm.add_argument(
        "--llm-system-prompt",
        choices=("system", "user"),
        default="system",
        help="where the role prompt goes: a system message (default), or folded into the "
        "first user message (user: for models whose chat template has no system role)",
    )
    llm.add_argument(
        "--llm-retries",
        type=_int_from(0, 100),
        default=4,
        metavar="N",
        help="retries of a failed call within the turn's deadline (default 4)",
    )
    llm.add_argument(
        "--llm-history",
        type=_int_from(0, 1000),
        default=0,
        metavar="N",
        help="send each LLM role its own last N turns of the episode (what it saw and "
        "answered) as earlier messages (default 0: none)",
    )
    llm.add_argument(
        "--max-tokens", type=_positive_int, default=256, metavar="N", help="completion limit"
    )
    llm.add_argument(
        "--llm-logprobs",
        action="store_true",
        help="ask for the logprobs of the completion's tokens; trajectories.jsonl then "
        "records logprobs and tokens (or token_ids) per LLM turn",
    )
    llm.add_argument(
        "--llm-top-logprobs",
        type=_non_negative_int,
        default=None,
        metavar="N",
        help="also ask for the N most likely alternatives at each token (>= 0; "
        "implies --llm-logprobs)",
    )
    llm.add_argument(
        "--llm-extra-body",
        type=_json_object,
        default=None,
        metavar="JSON",
        help="a JSON object merged into every request, e.g. vLLM's "
        "'{\"return_token_ids\": true}' or '{\"return_tokens_as_token_ids\": true}'",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``chaosops`` command."""
    parser = Parser(
        prog=PROG,
        description="Run, evaluate and replay ChaosOps incident-response episodes.",
    )

    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    _add_run_parser(sub)
    _add_eval_parser(sub)

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

    _add_viewer_parsers(sub)

    # listed for --help; its options are parsed by _mock.cmd_mock_llm
    sub.add_parser("mock-llm", help="local OpenAI-compatible server for demos and tests")
    return parser


def _add_viewer_parsers(sub: Any) -> None:
    watch = sub.add_parser(
        "watch",
        help="live dashboard of a run, read from its folder",
        description="Follow a run from its output folder (another process may be writing "
        "it): episodes done, in flight, turns by role, figures by tier, the latest "
        "episodes. With --episode, play one episode frame by frame. Ctrl-C leaves.",
    )
    watch.add_argument("folder", nargs="?", metavar="RUN_DIR", help="default: runs/latest")
    watch.add_argument("--episode", metavar="ID", help="an episode id (or its first characters)")
    watch.add_argument("--every", type=_seconds, default=0.5, metavar="S",
                       help="seconds between two reads of the folder (default 0.5)")  # fmt: skip
    watch.add_argument("--delay", type=_non_negative, default=1.0, metavar="S",
                       help="seconds between two frames of --episode (default 1)")  # fmt: skip

    view = sub.add_parser(
        "view",
        help="local web viewer of runs: episodes, transcripts, comparisons",
        description="Serve a web viewer of the run folders given (on 127.0.0.1 unless "
        "--host): each run's episodes, filtered and sorted; an episode's transcript; "
        "two runs compared. The URL is printed; Ctrl-C stops it.",
    )
    view.add_argument("folders", nargs="*", metavar="RUN_DIR", help="default: runs/latest")
    view.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    view.add_argument("--port", type=_int_from(0, 65535), default=0,
                      help="port (default 0: a free one)")  # fmt: skip

    tr = sub.add_parser(
        "transcript",
        help="one episode as plain text",
        description="Print one episode of a run as plain text: each step's role, the view "
        "it saw, its answer, the action applied and the reward.",
    )
    tr.add_argument("folder", metavar="RUN_DIR")
    tr.add_argument("--episode", required=True, metavar="ID",
                    help="an episode id (or its first characters)")  # fmt: skip


def _add_run_parser(sub: Any) -> None:
    """``chaosops run``: one policy (or one per role) over the suites."""
    run = sub.add_parser(
        "run",
        allow_abbrev=False,  # --resume tells options given from those recorded by name
        help="run scenario suites with one policy",
        description="Run scenario suites with one policy; write results.jsonl, "
        "trajectories.jsonl, summary.json and run.json to the output folder; print the table.",
    )
    _add_batch_options(run)
    run.add_argument(
        "--config",
        type=_run_file,
        metavar="RUN.toml",
        help="a run file: suites, each role's policy, named LLM endpoints, deadlines... "
        "(see examples/run.toml); options given here override it",
    )
    run.add_argument(
        "--policy",
        default="heuristic",
        help="policy playing the four roles (default heuristic): random, heuristic, oracle, "
        "llm, an LLM named in the run file, or module:attribute",
    )
    run.add_argument(
        "--role-policy",
        type=_role_policy,
        action="append",
        default=[],
        metavar="ROLE=POLICY",
        help="the policy of one role over --policy (repeatable): a scripted name, llm, an "
        "LLM named in the run file, or module:attribute, a policy (observation, role) or a "
        "factory (scenario -> role map)",
    )
    run.add_argument(
        "--name",
        type=_name,
        default=None,
        help="what the outputs call this run's players (their 'policy'; default: the "
        "policies, e.g. heuristic+dev=oracle)",
    )
    run.add_argument(
        "--out",
        type=_folder,
        default=None,
        metavar="DIR",
        help="output folder (default: a new runs/<UTC time>-<policy>, and runs/latest "
        "points to it)",
    )
    run.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out (default runs/latest) from its run.json: skip "
        "episodes already in results.jsonl",
    )
    run.add_argument(
        "--fsync", action="store_true", help="fsync after every episode (power-loss safety)"
    )


def _add_eval_parser(sub: Any) -> None:
    """``chaosops eval``: several policies over the suites, one table."""
    ev = sub.add_parser(
        "eval",
        allow_abbrev=False,
        help="evaluation table across policies and tiers",
        description="Run several policies over the suites and print the evaluation table "
        "(SPEC section 13); write it as JSON and a PNG chart when matplotlib is installed.",
    )
    _add_batch_options(ev)
    ev.add_argument(
        "--config",
        type=_run_file,
        action="append",
        default=[],
        metavar="RUN.toml",
        help="a run file to compare (repeatable): each is played like 'chaosops run --config' "
        "into a run folder under --out named after its 'name' (default: the file's stem); "
        "options given here override them all",
    )
    ev.add_argument(
        "--policies",
        type=_policy_list,
        default=None,
        metavar="LIST",
        help="comma-separated policies to compare, each into a run folder under --out "
        "(default random,heuristic,oracle, none when --config is given)",
    )
    ev.add_argument(
        "--role-policy",
        type=_role_policy,
        action="append",
        default=[],
        metavar="ROLE=POLICY",
        help="the policy of one role over each compared policy's (repeatable)",
    )
    ev.add_argument(
        "--resume",
        action="store_true",
        help="continue an evaluation in --out: each run folder skips the episodes it holds",
    )
    ev.add_argument(
        "--out",
        type=_folder,
        default=DEFAULT_EVAL_OUT,
        metavar="DIR",
        help=f"folder for eval.json and eval_reward_by_tier.png (default {DEFAULT_EVAL_OUT})",
    )
    ev.add_argument("--json", metavar="PATH", help="write the JSON table here ('-' for stdout)")
    ev.add_argument("--chart", metavar="PATH", help="write the PNG chart here")
    ev.add_argument("--no-chart", action="store_true", help="do not draw the chart")


def given_options(argv: Sequence[str]) -> set[str]:
    """The long options named on the command line (``--name`` or ``--name=value``);
    the parser takes no abbreviations, so a name is always written in full."""
    return {arg.split("=", 1)[0] for arg in argv if arg.startswith("--")}
