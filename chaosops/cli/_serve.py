"""``chaosops serve``: ChaosOps as an OpenEnv environment server, on loopback
unless ``--host`` says otherwise (docs/serve.md)."""

from __future__ import annotations

import argparse

from chaosops.agents.policies import SCRIPTED
from chaosops.env.models import AgentRole
from chaosops.outputs import OutputError

from ._errors import CLIError, output_error
from ._folders import new_run_folder, point_latest
from ._view import listening_socket, url_of


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from chaosops.serve import ServedRuns, TableRules, build_app, role_maps
        from chaosops.serve.runs import SERVED
    except ImportError as exc:  # the serve extra's; the rest of chaosops runs without it
        raise CLIError(
            f"chaosops serve needs the serve extra ({exc.name} is missing): "
            "pip install 'chaosops[serve]'"
        ) from None
    others = _others(args)
    idle = None if args.idle_timeout == 0 else args.idle_timeout
    sock = listening_socket(args.host, args.port)
    out = args.out or new_run_folder(SERVED)
    try:
        runs = ServedRuns(out).open()
    except OutputError as exc:
        sock.close()
        raise output_error(exc) from None
    if args.out is None:
        point_latest(out)
    rules = TableRules(
        role_maps(others), names={AgentRole(r): n for r, n in others.items()},
        client_timeout=args.client_timeout, max_misses=args.client_misses or None,
        fields={"policy": SERVED},
    )  # fmt: skip
    app = build_app(rules, max_sessions=args.max_sessions, idle_timeout=idle, runs=runs)
    url = url_of(args.host, sock)
    # on stdout, as mock-llm's and view's URL: a script reads it there
    print(f"chaosops serve: OpenEnv environment at {url} , episodes to {out} ; "
          "Ctrl-C stops it", flush=True)  # fmt: skip
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        runs.close()
    return 130 if server.should_exit else 0


def _others(args: argparse.Namespace) -> dict[str, str]:
    """The policy of each role a client leaves to the server: --policy, over
    it --role-policy (or the run file's policy and [roles]); scripted only."""
    chosen = dict.fromkeys((role.value for role in AgentRole), args.policy)
    chosen.update(dict(args.role_policy))
    for role, name in chosen.items():
        if name not in SCRIPTED:
            raise CLIError(
                f"--policy/--role-policy {role}={name}: chaosops serve plays the roles a client "
                f"leaves with a scripted policy ({', '.join(SCRIPTED)})"
            )
    return chosen
