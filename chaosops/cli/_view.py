"""``chaosops view RUN_DIR...``: the web viewer of run folders, on loopback
unless ``--host`` says otherwise."""

from __future__ import annotations

import errno
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chaosops.outputs import EVAL_FILE, RESULTS_FILE, read_object

from ._errors import CLIError
from ._watch import open_index, run_path


def cmd_view(folders: Sequence[str], host: str, port: int) -> int:
    # uvicorn and starlette are slow to import: for this command only
    import uvicorn

    from chaosops.viewer.web import build_app

    # a folder named twice (to compare a run with itself) is indexed once
    opened: dict[Path, Any] = {}
    indexes = []
    chosen: list[str | None] = [*folders] or [None]  # none given: runs/latest
    for folder in chosen:
        for path in _runs_in(run_path(folder).resolve()):
            if path not in opened:
                opened[path] = open_index(path)
            indexes.append(opened[path])
    sock = listening_socket(host, port)
    # on stdout, as mock-llm's URL: a script reads it there
    url = f"{url_of(host, sock)}/"
    print(f"chaosops view serving {len(indexes)} run(s) at {url} ; Ctrl-C stops it", flush=True)
    server = uvicorn.Server(uvicorn.Config(build_app(indexes), log_level="warning"))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        for index in opened.values():
            index.close()
    return 0


def _runs_in(folder: Path) -> list[Path]:
    """``folder``, or the run folders of its entries when it holds an evaluation
    (``eval.json``, each entry a folder beside it)."""

    evaluation = read_object(folder / EVAL_FILE)
    if (folder / RESULTS_FILE).exists() or evaluation is None:
        return [folder]
    try:
        runs = [folder / Path(str(entry["folder"])).name for entry in evaluation["entries"]]
    except (KeyError, TypeError):
        return [folder]  # not ours: open_index says what it is
    return [run for run in runs if run.is_dir()] or [folder]


def url_of(host: str, sock: socket.socket) -> str:
    """``http://HOST:PORT`` of a listening socket (an IPv6 host in brackets)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{sock.getsockname()[1]}"


def listening_socket(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port``; one line (exit 2) when it cannot be had."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror as exc:
        raise CLIError(f"--host {host}: {exc.strerror}") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRNOTAVAIL:  # the host's fault, not the port's
            raise CLIError(
                f"--host {host}: not an address of this machine ({exc.strerror}); give one "
                "of its own, e.g. 127.0.0.1"
            ) from None
        raise CLIError(
            f"--port {port}: cannot listen on {host}:{port}: {exc.strerror or exc}"
            + ("; give another --port, or 0 for a free one" if port else "")
        ) from None
    sock.listen(128)
    return sock
