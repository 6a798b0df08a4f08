"""The argument parser of the ``chaosops`` command.

The options of ``run`` (and those ``eval`` shares) come from the table in
:mod:`chaosops.runs.options`, declared by :mod:`._declare`; the commands' own few are declared here.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from chaosops import __version__
from chaosops.env.models import DifficultyTier, FailureType
from chaosops.runs.values import PolicyName
from chaosops.viewer.index import SORTS

from . import _values as v
from ._declare import add_options, add_serve_options
from ._errors import PROG, CLIError, one_line
from ._flags import REPEATABLE as _REPEATABLE_OPTIONS

DEFAULT_EVAL_OUT = Path("runs") / "eval"
DEFAULT_EVAL_POLICIES: tuple[str, ...] = ("random", "heuristic", "oracle")
REPEATABLE = _REPEATABLE_OPTIONS | {"--config", "--refuse"}
"""Options that may be given more than once: the table's, eval's run files, mock-llm's refusals."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``chaosops: error: ...``, exit 2)."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{PROG}: error: {one_line(message)} (see '{self.prog} --help')\n")
        sys.exit(2)


def refuse_repeats(argv: Sequence[str], role_policies: Sequence[tuple[str, str]] = ()) -> None:
    """Refuse an option of one value given twice, and a role given twice to
    ``--role-policy`` (``role_policies``, as parsed): the last would silently win."""
    given = Counter(arg.split("=", 1)[0] for arg in argv if arg.startswith("--"))
    for option, count in given.items():
        if count > 1 and option not in REPEATABLE:
            advice = (
                "; a role of its own: --role-policy ROLE=POLICY" if option == "--policy" else ""
            )
            raise CLIError(f"{option} is given {count} times; give it once{advice}")
    roles = Counter(role for role, _ in role_policies)
    if twice := sorted(role for role, count in roles.items() if count > 1):
        raise CLIError(
            f"--role-policy gives {twice[0]} {roles[twice[0]]} times; give each role once"
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
    _add_episodes_parser(sub)

    _add_serve_parser(sub)

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
    watch.add_argument(
        "--once", action="store_true",
        help="print the dashboard once, as it stands, and leave (for scripts and logs)",
    )  # fmt: skip
    watch.add_argument(
        "--every",
        type=v.seconds,
        default=0.5,
        metavar="S",
        help="seconds between two reads of the folder (default 0.5)",
    )
    watch.add_argument(
        "--delay",
        type=v.non_negative,
        default=1.0,
        metavar="S",
        help="seconds between two frames of --episode (default 1)",
    )

    view = sub.add_parser(
        "view",
        help="local web viewer of runs: episodes, transcripts, comparisons",
        description="Serve a web viewer of the run folders given (on 127.0.0.1 unless "
        "--host): each run's episodes, filtered and sorted; an episode's transcript; "
        "two runs compared. The URL is printed; Ctrl-C stops it.",
    )
    view.add_argument("folders", nargs="*", metavar="RUN_DIR", help="default: runs/latest")
    view.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    view.add_argument("--port", type=v.port, default=0, help="port (default 0: a free one)")

    tr = sub.add_parser(
        "transcript",
        help="one episode as plain text",
        description="Print one episode of a run as plain text: each step's role, the view "
        "it saw, its answer, the action applied and the reward; without --episode, list the "
        "run's episodes with their handles, outcomes and rewards.",
    )
    tr.add_argument("folder", metavar="RUN_DIR")
    tr.add_argument(
        "--episode", metavar="ID",
        help="an episode id (or its first characters), its scenario failure/tier/seed=N, "
        "or one sample of it, ...seed=N#K; without it, the run's episodes are listed",
    )  # fmt: skip


def _add_episodes_parser(sub: Any) -> None:
    episodes = sub.add_parser(
        "episodes",
        help="a run's episodes, filtered and sorted, as a table",
        description="List the finished episodes of a run folder: handle, id, policy, "
        "outcome, MTTR, steps and reward, filtered by failure type, tier and outcome, "
        "and sorted as the viewer sorts them.",
    )
    episodes.add_argument("folder", nargs="?", metavar="RUN_DIR", help="default: runs/latest")
    episodes.add_argument("--failure-type", choices=[f.value for f in FailureType],
                          metavar="TYPE", help="only this failure type")  # fmt: skip
    episodes.add_argument("--tier", choices=[t.value for t in DifficultyTier],
                          help="only this tier")  # fmt: skip
    outcome = episodes.add_mutually_exclusive_group()
    outcome.add_argument("--unresolved", action="store_true", help="only the unresolved ones")
    outcome.add_argument("--resolved", action="store_true", help="only the resolved ones")
    episodes.add_argument(
        "--sort", choices=[key for key in SORTS if not key.startswith("-")], default="finished",
        help="the order: as finished (default), by reward, MTTR or steps, ascending",
    )  # fmt: skip
    episodes.add_argument("--desc", action="store_true", help="sort descending")
    episodes.add_argument(
        "--limit", type=v.positive_int, metavar="N", help="at most N episodes (after sorting)"
    )


def _add_serve_parser(sub: Any) -> None:
    serve = sub.add_parser(
        "serve",
        allow_abbrev=False,
        help="serve ChaosOps as an OpenEnv environment (needs the serve extra)",
        description="Serve ChaosOps over OpenEnv's protocol (WebSocket /ws, /health, /schema) "
        "on 127.0.0.1 unless --host: a client plays the roles it names at reset, other "
        "clients or the server's policies (scripted or LLM) the others. The URL is printed; "
        "Ctrl-C stops it (exit 130).",
    )
    add_serve_options(serve)
    serve.add_argument("--out", type=v.folder, metavar="DIR",
                       help="run folder the served episodes go to (default: a new "
                       "runs/<UTC time>-served, and runs/latest points to it)")  # fmt: skip
    serve.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=v.port, default=8000, help="port (default 8000; 0: a free one)"
    )
    serve.add_argument(
        "--max-sessions",
        type=v.positive_int,
        default=64,
        metavar="N",
        help="sessions at once (default 64); one more gets CAPACITY_REACHED",
    )
    serve.add_argument(
        "--idle-timeout",
        type=v.non_negative,
        default=300.0,
        metavar="S",
        help="close a session idle this long (default 300; 0: never)",
    )
    serve.add_argument(
        "--client-timeout",
        type=v.seconds,
        metavar="S",
        help="a client's turn deadline: past it the server plays noop for it (default: none)",
    )
    serve.add_argument(
        "--client-misses",
        type=v.non_negative_int,
        default=3,
        metavar="N",
        help="close a session whose client missed N turns in a row (default 3; 0: never)",
    )


def _add_run_parser(sub: Any) -> None:
    """``chaosops run``: one policy (or one per role) over the suites."""
    run = sub.add_parser(
        "run",
        allow_abbrev=False,  # --resume tells options given from those recorded by name
        help="run scenario suites with one policy",
        description="Run scenario suites with one policy; write results.jsonl, "
        "trajectories.jsonl, summary.json and run.json to the output folder; print the table.",
    )
    add_options(run, run=True)
    # eval's own, which a run's configuration reads too; and where the run goes
    run.set_defaults(policies=None, json=None, chart=None, no_chart=False, point_latest=False)


def _add_eval_parser(sub: Any) -> None:
    """``chaosops eval``: several policies over the suites, one table."""
    ev = sub.add_parser(
        "eval",
        allow_abbrev=False,
        help="evaluation table across policies and tiers",
        description="Run several policies over the suites and print the evaluation table "
        "(docs/world.md, 'Evaluation figures'); write it as JSON and a PNG chart when "
        "matplotlib is installed.",
    )
    add_options(ev, run=False)
    ev.set_defaults(point_latest=False)
    ev.add_argument(
        "--config",
        type=v.run_file,
        action="append",
        default=[],
        metavar="RUN.toml",
        help="a run file to compare (repeatable): each is played like 'chaosops run --config' "
        "into a run folder under --out named after its 'name' (default: the file's stem); "
        "options given here override them all",
    )
    ev.add_argument(
        "--policies",
        type=v.policy_list,
        default=None,
        metavar="LIST",
        help="comma-separated policies to compare, each into a run folder under --out "
        "(default random,heuristic,oracle, none when --config is given)",
    )
    ev.add_argument(
        "--role-policy",
        type=v.by_role(PolicyName),
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
        type=v.folder,
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
