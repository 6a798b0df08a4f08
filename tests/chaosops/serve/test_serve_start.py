"""A server that cannot start: uvicorn says why and exits 3 (as ``uvicorn``
itself does), and the run folder is closed as after any stop."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests._needs import needs

try:
    import openenv
except ImportError:  # the serve extra
    openenv = None

# In a process of its own: the command configures the process's logging, and
# uvicorn ends the process when the app cannot start.
_SCRIPT = """
import argparse, contextlib, sys
import uvicorn
from starlette.applications import Starlette
from chaosops.runs.config import Telemetry
from chaosops.cli._serve import ServerStack, _serve
from chaosops.runs.session import Session
from chaosops.serve import ServedRuns

@contextlib.asynccontextmanager
async def lifespan(app):
    raise RuntimeError("this app cannot start")
    yield

def build_app(rules, **options):
    return Starlette(lifespan=lifespan)

out = sys.argv[1]
args = argparse.Namespace(host="127.0.0.1", port=0, out=out, idle_timeout=0, max_sessions=1)
code = _serve(args, out, rules=None, llms={}, telemetry=Telemetry(), session=Session(),
              stack=ServerStack(uvicorn, ServedRuns, build_app))
print(f"returned {code}")
"""


def test_a_server_that_cannot_start_exits_3_and_closes_its_run_folder(tmp_path: Path) -> None:
    needs(openenv, "openenv", "pip install -e '.[test]' (or the 'serve' extra)")
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path / "served")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "returned" not in proc.stdout
    assert "this app cannot start" in proc.stderr  # uvicorn's own account of it
    assert (tmp_path / "served" / "summary.json").exists()
