"""What a scripted run loads: not the LLM client (aiohttp) nor the servers'
stacks (uvicorn, starlette, jsonschema), which a command that needs them
loads itself. Every CLI call pays for what the command imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ._cli import TINY, cli_env

HEAVY = ("aiohttp", "uvicorn", "starlette", "jsonschema")

_RUN_THEN_LIST = """
import sys
from chaosops.cli import main
code = main(sys.argv[1:])
print(code, " ".join(name for name in {heavy!r} if name in sys.modules))
"""


def _loaded_by(*args: str, cwd: Path) -> tuple[str, str]:
    """The command's exit code and which of :data:`HEAVY` it loaded."""
    script = _RUN_THEN_LIST.format(heavy=HEAVY)
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True, text=True, cwd=cwd, env=cli_env(), timeout=60, check=False,
    )  # fmt: skip
    code, _, loaded = proc.stdout.strip().splitlines()[-1].partition(" ")
    return code, loaded


def test_a_scripted_run_loads_no_http_client_nor_server(work: Path) -> None:
    code, loaded = _loaded_by("run", *TINY, "--out", "startup", cwd=work)
    assert code == "0"
    assert loaded == ""
    assert (work / "startup" / "results.jsonl").exists()


def test_an_llm_run_loads_the_http_client(work: Path) -> None:
    # the lazy load is the same code path a real LLM run takes: it must still load
    code, loaded = _loaded_by(
        "run", *TINY, "--policy", "llm", "--llm-base-url", "http://127.0.0.1:9/v1",
        "--out", "llm", cwd=work,
    )  # fmt: skip
    assert code == "1"  # nothing listens on port 9: the endpoint check fails
    assert "aiohttp" in loaded.split()
