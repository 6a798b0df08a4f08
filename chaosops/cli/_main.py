"""The entry point: parse the command line, dispatch, turn errors into exit codes."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence

from actors import resolve_loop
from chaosops.runs.cluster import on_cluster
from chaosops.runs.kinds import KINDS
from chaosops.runs.session import Session
from chaosops.runs.stopping import restoring_signals
from chaosops.untrusted import printable

from ._args import build_parser, given_options, refuse_repeats
from ._config import RunConfig, config_from_args, eval_entries
from ._episodes import cmd_episodes
from ._errors import (
    PROG,
    CLIError,
    RunError,
    note,
    notes_on_stderr,
    one_line,
    os_error_in,
    os_error_line,
    said,
)
from ._eval import cmd_eval
from ._flags import flags_of
from ._folders import new_run_folder
from ._mock import cmd_mock_llm
from ._replay import cmd_replay
from ._resume import fill_from_run_record
from ._run import cmd_run
from ._run_file import apply_run_file
from ._scenarios import cmd_scenarios
from ._serve import cmd_serve
from ._telemetry import finish
from ._view import cmd_view
from ._watch import cmd_transcript, cmd_watch

_COMMANDS = (
    "run",
    "eval",
    "replay",
    "scenarios",
    "watch",
    "view",
    "transcript",
    "episodes",
    "serve",
)


def main(argv: Sequence[str] | None = None, *, keep_signals: bool = False) -> int:
    """The ``chaosops`` command; returns the exit code. A run stopped by a
    signal holds the next ones (see _stopping): the handlers are restored
    after, unless ``keep_signals`` (the console script, which exits then)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    with notes_on_stderr():
        if keep_signals:
            return _main(argv)
        with restoring_signals():
            return _main(argv)


def _main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["mock-llm"]:
            return cmd_mock_llm(argv[1:])
        parser = build_parser()
        if argv and argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
            # `chaosops --policy oracle`: the options of a command come after it
            parser.error(
                f"{argv[0]} comes after a command: chaosops COMMAND {argv[0]} ...; "
                f"choose the command from {', '.join([*_COMMANDS, 'mock-llm'])}"
            )
        if argv[:1] == ["eval"] and any(a.split("=")[0] == "--policy" for a in argv):
            # argparse would say only "unrecognized arguments"
            parser.error("eval compares policies: give them as --policies A,B, not --policy")
        args = parser.parse_args(argv)
        refuse_repeats(argv, vars(args).get("role_policy") or ())
        if args.command is None:
            parser.error(f"missing command; choose from {', '.join([*_COMMANDS, 'mock-llm'])}")
        if args.command == "eval":
            return _dispatch(args, eval_entries(args, argv))
        if args.command in ("run", "serve"):  # the commands a run file and run.json feed
            args = fill_from_run_record(apply_run_file(args, argv), argv)
            _note_unused_model_flags(args, argv)
        return _dispatch(_new_folder(args))
    except RunError as exc:
        return _report(exc)
    except KeyboardInterrupt:
        note("interrupted")
        return 130
    except BrokenPipeError:
        # stdout closed by a pager or `head` once the outputs were written (the
        # table comes last): exit as a shell does for a closed pipe, 128 + SIGPIPE,
        # without the interpreter's own complaint when it flushes stdout at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (OSError, BaseExceptionGroup) as exc:
        # A system error the command did not report itself (a write failing
        # mid-run, in a batch's task group): one line, not a traceback.
        error = os_error_in(exc)
        if error is None:
            raise
        sys.stderr.write(f"{PROG}: error: {os_error_line(error)}\n")
        return 1


def _new_folder(args: argparse.Namespace) -> argparse.Namespace:
    """A run without ``--out`` gets a folder of its own under runs/ (see _folders),
    named after the run's name (``--name``, a run file's ``name``) or its policy."""
    if args.command == "run" and args.out is None:
        named = args.name or args.policy
        args.out, args.point_latest = new_run_folder(named), True
    return args


def _note_unused_model_flags(args: argparse.Namespace, argv: Sequence[str]) -> None:
    """A note for a kind's flags given when no role plays that kind's own model
    (``--llm-model`` without ``--policy llm``): they would go unused unsaid."""
    played = {args.policy, *(name for _, name in (args.role_policy or ()))}
    named = getattr(args, "named_models", None) or {}  # the run file's, which a key may serve
    given = given_options(argv)
    for kind in KINDS:
        flags = sorted({f for _, _, options in flags_of(kind.name) for f in options} & given)
        ours = {kind.name} | {n for n, s in named.items() if isinstance(s, kind.settings)}
        if flags and not ours & played:
            note(
                f"{', '.join(flags)} given, but no role plays the {kind.name} policy "
                f"(--policy {kind.name}, or --role-policy ROLE={kind.name}): not used"
            )


def _dispatch(args: argparse.Namespace, entries: Sequence[RunConfig] = ()) -> int:
    """Run the command: ``run`` and ``eval`` on their frozen configuration
    (``eval``: with the run configuration of each entry it compares)."""
    if args.command == "replay":
        return cmd_replay(args.results)
    if args.command == "scenarios":
        return cmd_scenarios(args.paths)
    if args.command == "episodes":
        return cmd_episodes(args)
    if args.command in ("watch", "view", "transcript"):
        return _viewer(args)
    if args.command == "serve":
        return cmd_serve(args)
    _check_event_loop()
    config = config_from_args(args)
    session = Session()
    try:
        with on_cluster(config) as config:
            if config.command == "eval":
                entries = [dataclasses.replace(e, workers=config.workers) for e in entries]
                return cmd_eval(config, entries, session)
            return cmd_run(config, session)
    except RunError as exc:
        return _report(exc)  # said before the metrics' linger, not after it
    finally:
        finish(config.telemetry, session)  # the metrics' linger, the last spans sent


def _viewer(args: argparse.Namespace) -> int:

    if args.command == "watch":
        return cmd_watch(args.folder, args.episode, args.every, args.delay, args.once)
    if args.command == "transcript":
        return cmd_transcript(args.folder, args.episode)
    return cmd_view(args.folders, args.host, args.port)


def _report(exc: RunError) -> int:
    """The error's one line on stderr; returns its exit code."""
    sys.stderr.write(f"{PROG}: error: {printable(one_line(said(exc)))}\n")
    return exc.code


def _check_event_loop() -> None:
    """``ACTORS_LOOP`` (the event loop of the runs) is valid, before anything is written."""

    try:
        resolve_loop()
    except ValueError as exc:
        raise CLIError(str(exc)) from None
