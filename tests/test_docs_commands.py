"""Every shell command and Python block in the README and docs/ runs as
written, so the docs cannot drift from the code.

Each ```bash block is run line by line, in order, in a folder of its own that
holds the repository's suites, examples and tests (and `.venv`, this
interpreter's environment), with this environment's `bin` first on PATH. A line
ending in `&` starts a server: it is ready once it prints its first line, and is
stopped when the block ends. Each ```python block is one program run by this
interpreter in such a folder; one that talks to a server names it right above
its fence, `<!-- run beside: chaosops serve --port 8000 -->`, started first the
same way. A block that cannot run here (it installs from a registry, needs a
tool or a service the project does not bring, or names the reader's own files)
is marked right above its fence with `<!-- not run: the reason -->`; the marks
are listed at the end of the run.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

import pytest

from tests._ray import RAY_TIMEOUT, one_ray_instance

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHARED = ("scenarios", "examples", "tests", "benchmarks", "pyproject.toml", "docs")
_BLOCK = re.compile(
    r"(<!-- (?:not run: (?P<why>[^>]*)|run beside: (?P<beside>[^>]*)) -->\n[ \t]*)?"
    r"```(?P<lang>bash|sh|python)\n(?P<body>.*?)```",
    re.S,
)
TIMEOUT = 300


def _blocks() -> list[tuple[str, str | None, list[str]]]:
    """(where, why it is not run or None, its commands) for every block: a
    Python block's commands are the servers it runs beside, then
    ``python -c PROGRAM``."""
    found = []
    for doc in DOCS:
        text = doc.read_text()
        for match in _BLOCK.finditer(text):
            line = text[: match.start("body")].count("\n")
            where = f"{doc.relative_to(ROOT)}:{line}"
            body = match.group("body")
            if match.group("lang") == "python":
                beside = match.group("beside")
                commands = [f"{beside} &"] if beside else []
                commands.append(f"python -c {shlex.quote(body)}")
            else:
                commands = _commands(body)
            found.append((where, match.group("why"), commands))
    return found


def _commands(body: str) -> list[str]:
    """The block's commands: continued lines joined, blank lines dropped."""
    return [c.strip() for c in body.replace("\\\n", " ").splitlines() if c.strip()]


BLOCKS = _blocks()
RUN = [(where, commands) for where, why, commands in BLOCKS if why is None]


def test_every_block_not_run_says_why(record_property: pytest.RecordProperty) -> None:
    skipped = [(where, why) for where, why, _ in BLOCKS if why is not None]
    assert all(why.strip() for _, why in skipped)
    assert len(RUN) >= 5, "most of the docs' commands run"
    for where, why in skipped:
        record_property(where, why)
        print(f"not run: {where}: {why}")


# each command is bounded by TIMEOUT (RAY_TIMEOUT); a block that waits for the
# Ray lock first may wait for the Ray tests' whole file
@pytest.mark.timeout(3600)
@pytest.mark.parametrize(("where", "commands"), RUN, ids=[where for where, _ in RUN])
def test_a_doc_block_runs(
    where: str, commands: list[str], tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    commands, ports = _free_ports(commands)
    for name in SHARED:
        _share(ROOT / name, tmp_path / name, ports)
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "120"
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / ".hf"))  # datasets: no network
    servers: list[subprocess.Popen[str]] = []
    try:
        for command in commands:
            code = command.split(" #", 1)[0].rstrip()  # without a trailing comment
            if code.endswith("&"):
                servers.append(_serve(code.removesuffix("&"), tmp_path, env))
                continue
            ray = "--ray" in code
            with one_ray_instance(tmp_path_factory) if ray else nullcontext():
                done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env,
                                      capture_output=True, text=True,
                                      timeout=RAY_TIMEOUT if ray else TIMEOUT)  # fmt: skip
            assert done.returncode == 0, f"{where}: {command}\n{done.stdout}\n{done.stderr}"
    finally:
        for server in servers:
            os.killpg(server.pid, signal.SIGTERM)
            server.communicate(timeout=30)


_PORT = re.compile(r"(--port[ =]|127\.0\.0\.1:|localhost:)(80\d\d)\b")


def _free_ports(commands: list[str]) -> tuple[list[str], dict[str, int]]:
    """The commands with each port the docs write (8000, 8001) replaced by one the
    system gives free, the same in every command: blocks run beside other tests."""
    ports: dict[str, int] = {}
    for command in commands:
        for _, port in _PORT.findall(command):
            if port not in ports:
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", 0))
                    ports[port] = probe.getsockname()[1]
    return [_ported(c, ports) for c in commands], ports


def _ported(text: str, ports: dict[str, int]) -> str:
    return _PORT.sub(lambda m: f"{m.group(1)}{ports.get(m.group(2), m.group(2))}", text)


def _share(source: Path, target: Path, ports: dict[str, int]) -> None:
    """``source`` linked at ``target``; the examples' run files copied instead
    with the block's ports, when it has any (they name the servers' URLs)."""
    if not ports or source.name != "examples":
        target.symlink_to(source)
        return
    target.mkdir()
    for item in source.iterdir():
        if item.suffix == ".toml":
            (target / item.name).write_text(_ported(item.read_text(), ports))
        else:
            (target / item.name).symlink_to(item)


def _serve(command: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """A server started by a doc line, once it said it is listening."""
    server = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=cwd, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              start_new_session=True)  # fmt: skip
    assert server.stdout is not None
    first = server.stdout.readline()
    if not first:
        said = server.stderr.read() if server.stderr else ""
        raise AssertionError(f"{command}: exited before listening: {said}")
    return server
