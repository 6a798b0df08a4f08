"""Where a run goes without ``--out``: a new folder under ``runs/``, and ``runs/latest``."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

RUNS = Path("runs")
LATEST = RUNS / "latest"
"""A link to the newest run folder made without ``--out``."""


def new_run_folder(policy: str, now: float | None = None) -> Path:
    """``runs/<UTC time>-<policy>``, a name no folder has yet (``-2``, ``-3``... added)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    policy = folder_name(policy)
    folder = RUNS / f"{stamp}-{policy}"
    number = 1
    while folder.exists() or folder.is_symlink():
        number += 1
        folder = RUNS / f"{stamp}-{policy}-{number}"
    return folder


def folder_name(text: str) -> str:
    """``text`` as a folder name: a module:attribute or a path's characters become ``_``."""
    return re.sub(r"[^A-Za-z0-9_.=+-]", "_", text).lstrip(".") or "_"


def latest_run() -> Path | None:
    """The folder ``runs/latest`` points to (or is), None when there is none."""
    if LATEST.is_symlink():
        return RUNS / os.readlink(LATEST)
    return LATEST if LATEST.is_dir() else None


def point_latest(folder: Path) -> bool:
    """Point ``runs/latest`` at ``folder`` (a sibling), replacing the link atomically.

    Returns False, changing nothing, where ``runs/latest`` is a real folder
    (a run made before run folders had their own names) or links cannot be made.
    """
    if LATEST.exists() and not LATEST.is_symlink():
        return False
    staged = RUNS / f".latest-{os.getpid()}"
    try:
        if staged.is_symlink():
            staged.unlink()
        staged.symlink_to(folder.name, target_is_directory=True)
        os.replace(staged, LATEST)
    except OSError:
        return False
    return True
