"""A run killed midway is shown as stopped, with nothing in flight and the
command that resumes it, by ``chaosops watch`` and ``chaosops view``."""

from __future__ import annotations

import json
from pathlib import Path

from ._cli import chaosops, killed_run, viewed_page

SLOW = """\
import asyncio

from chaosops.env.models import ChaosOpsAction


async def policy(obs, role):
    await asyncio.sleep(0.05)
    return ChaosOpsAction(role=role, action_type="noop")
"""


def test_a_killed_run_is_stopped_not_running(work: Path) -> None:
    (work / "slow.py").write_text(SLOW)
    out = work / "killed"
    killed_run("run", "tiny.toml", "--episodes-per-type", "3", "--policy", "slow:policy",
               "--concurrency", "2", "--no-progress", "--out", out, cwd=work, out=out,
               after=1)  # fmt: skip
    watched = chaosops("watch", out, cwd=work)
    assert watched.returncode == 0, watched.stderr
    assert "stopped" in watched.stdout and "running" not in watched.stdout
    assert f"--resume --out {out}" in watched.stdout.replace("\n", "")
    assert "in flight 0" in watched.stdout
    once = chaosops("watch", out, "--once", cwd=work)  # the dashboard as it stands, printed
    assert once.returncode == 0 and "stopped" in once.stdout and "turns by role" in once.stdout
    _, page = viewed_page(work, out, "/run/0")
    assert "stopped" in page and "running" not in page
    _, state = viewed_page(work, out, "/run/0/state")
    assert json.loads(state)["status"] == "stopped" and json.loads(state)["in_flight"] == 0
