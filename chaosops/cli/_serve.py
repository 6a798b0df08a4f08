"""``chaosops serve``: ChaosOps as an OpenEnv environment server, on loopback
unless ``--host`` says otherwise (docs/serve.md)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

from actors import timeouts_by_role
from chaosops._extras import missing_extra
from chaosops.env.models import AgentRole
from chaosops.outputs import OutputError
from chaosops.runs.config import RunConfig, Telemetry, log_target
from chaosops.runs.errors import RunError
from chaosops.runs.folder import served_record
from chaosops.runs.policies import prepare_models, role_map_factory
from chaosops.runs.session import Session
from chaosops.untrusted import printable

from ._config import check_policies, spec_of
from ._errors import CLIError, output_error
from ._folders import new_run_folder, point_latest
from ._telemetry import finish, start_telemetry
from ._terminal import configure_logs
from ._view import listening_socket, url_of

_YOUNG_GC = 100_000
_GRACE_S = 2.0
"""Seconds Ctrl-C leaves the steps in flight before they are cancelled."""


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        with _without_openenv_web_interface():  # the serve extra (slow to import): here only
            import uvicorn

            from chaosops.serve import ServedRuns, TableRules, build_app
            from chaosops.serve.runs import SERVED
    except ImportError as exc:  # the serve extra's; the rest of chaosops runs without it
        raise CLIError(missing_extra("chaosops serve", "serve", exc.name)) from None
    config = _config(args, args.out or new_run_folder(SERVED))
    telemetry, session = config.telemetry, Session()
    try:
        start_telemetry(telemetry, session)  # each fails, one line, before anything is written
        llms, spec = prepare_models(config.spec)
        rules = TableRules(
            role_map_factory(spec.policy_by_role, llms, ()),
            deadlines=timeouts_by_role(spec.deadlines.for_suite(None), AgentRole),
            players={AgentRole(role): player for role, player in spec.players.items()},
            client_timeout=args.client_timeout, max_misses=args.client_misses or None,
            fields={"policy": SERVED, "model": spec.models_played},
        )  # fmt: skip
        runs = functools.partial(ServedRuns, record=served_record(spec))
        stack = ServerStack(uvicorn, runs, build_app)
        return _serve(args, config.out, rules=rules, llms=llms, telemetry=telemetry,
                      session=session, stack=stack)  # fmt: skip
    finally:
        finish(telemetry, session)


@contextlib.contextmanager
def _without_openenv_web_interface() -> Iterator[None]:
    """OpenEnv's server package loads its web interface whenever gradio can be
    imported, and openenv requires gradio: 2.7 s and 120 MB of this command's
    start, for a page it does not serve. OpenEnv goes without that interface
    when gradio is missing, so while the block imports openenv, gradio is made
    unimportable (None in ``sys.modules``), and importable again after it.
    ``ENABLE_WEB_INTERFACE``, OpenEnv's switch for the interface, keeps it."""
    wanted = os.environ.get("ENABLE_WEB_INTERFACE", "").lower() in ("true", "1", "yes")
    if wanted or "gradio" in sys.modules:
        yield
        return
    sys.modules["gradio"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        if "gradio" in sys.modules and sys.modules["gradio"] is None:
            del sys.modules["gradio"]


@dataclass(frozen=True)
class ServerStack:
    """What serves: uvicorn, the served run folder's class, the app's builder
    (imported with the serve extra; a test gives an app that cannot start)."""

    uvicorn: Any
    served_runs: Any
    build_app: Any


def _serve(args: argparse.Namespace, out: Any, *, rules: Any, llms: dict[str, Any],
           telemetry: Telemetry, session: Session, stack: ServerStack) -> int:  # fmt: skip
    """Open the run folder and its log, then serve until Ctrl-C (exit 130) or
    SIGTERM (exit 143), each writing what was served before the exit."""
    uvicorn = stack.uvicorn
    sock = listening_socket(args.host, args.port)
    try:
        runs = stack.served_runs(out, announce=_say).open()
    except OutputError as exc:
        sock.close()
        raise output_error(exc, resumable=False) from None  # a server starts afresh
    except RunError:
        sock.close()
        raise
    configure_logs(telemetry.log_json, runs.folder.files, session)
    if args.out is None:
        point_latest(out)
    idle = None if args.idle_timeout == 0 else args.idle_timeout
    app = stack.build_app(rules, max_sessions=args.max_sessions, idle_timeout=idle, runs=runs)
    for llm in llms.values():  # their HTTP sessions belong to the server's loop
        app.router.on_shutdown.append(llm.aclose)
    url = url_of(args.host, sock)
    # on stdout, as mock-llm's and view's URL: a script reads it there
    print(f"chaosops serve: OpenEnv environment at {url} , episodes to {out} ; "
          "Ctrl-C stops it", flush=True)  # fmt: skip
    # Observations are a few KB: deflating each costs both ends more CPU than it
    # saves. A session waiting for another client's move is not waiting on its
    # connection, so Ctrl-C ends it after a grace period rather than never.
    config = uvicorn.Config(app, log_level="warning", ws_per_message_deflate=False,
                            timeout_graceful_shutdown=_GRACE_S)  # fmt: skip
    server = _server_class(uvicorn)(config)
    # The process is the server's. What it loaded (some 200,000 objects, with
    # openenv's) is kept out of the collector's sight, which full collections
    # would otherwise walk, stopping every session for tens of milliseconds.
    # A step allocates hundreds of objects that reference counting frees: the
    # young generation is collected every 100,000 allocations, not every 700
    # (8-13% more steps a second at 64 sessions; a few MB of cycles wait at most).
    gc.freeze()
    gc.set_threshold(_YOUNG_GC, *gc.get_threshold()[1:])
    previous = signal.signal(signal.SIGTERM, _exit_after_sigterm)
    try:
        server.run(sockets=[sock])
    finally:
        signal.signal(signal.SIGTERM, previous)
        sock.close()
        _close(runs)
    # Not reached: uvicorn raises again the signal that stopped it (Ctrl-C:
    # KeyboardInterrupt; SIGTERM: _exit_after_sigterm's exit), and exits 3 when
    # it cannot start; the finally clause above writes the run folder either way.
    return 0


def _exit_after_sigterm(signum: int, frame: FrameType | None) -> NoReturn:
    # uvicorn stops as on Ctrl-C, then raises the signal again under the handler
    # it found: the default one would end the process before the queued
    # episodes and summary.json are written (systemd and Kubernetes stop so).
    raise SystemExit(128 + signum)


def _server_class(uvicorn: Any) -> Any:
    """uvicorn's server, which stops the episodes in play first when it stops:
    a session waiting for another client's move then returns at once."""

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            await self.config.app.state.tables.aclose()
            await super().shutdown(sockets)

    return Server


def _say(line: str) -> None:
    """A line on stdout, where the server's address went: an episode served, the total."""
    try:
        print(f"chaosops serve: {printable(line)}", flush=True)
    except (BrokenPipeError, ValueError):  # nobody reads stdout any more: the folder has it
        pass


def _close(runs: Any) -> None:
    """The queued writes and summary.json; a write that failed is one line (an
    OSError's line is the command's own, as for any command)."""
    try:
        runs.close()
    except OutputError as exc:
        raise output_error(exc) from None


def _config(args: argparse.Namespace, out: Path) -> RunConfig:
    """What the server plays for the roles clients leave, as a run's
    configuration: the same players, in the same order, as ``chaosops run``."""
    check_policies([args.policy], args.role_policy, args.named_models)
    return RunConfig(
        command="serve", spec=spec_of(args, [args.policy]), out=out,
        telemetry=Telemetry(
            log_json=log_target(args.log_json, out), metrics_port=args.metrics_port,
            metrics_host=args.metrics_host, otlp_endpoint=args.otlp_endpoint,
        ),
    )  # fmt: skip
