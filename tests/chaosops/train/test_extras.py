"""Without its extra, a trainer's adapter (and `chaosops serve`) says which
extra to install, in a Python where the extra's package cannot be imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TOOL_ENV = "from chaosops.train.trl import ChaosOpsToolEnv as E; E(base_url='http://127.0.0.1:9')"
CASES = {  # the missing package: (the code a user runs, what the error names, the extra)
    "gymnasium": ("import chaosops.train.pettingzoo", "chaosops.train.pettingzoo", "pettingzoo"),
    "datasets": ("import chaosops.train as t; t.dataset()", "chaosops.train.dataset", "train"),
    "openenv": (TOOL_ENV, "ChaosOpsToolEnv(base_url=...)", "serve"),
}


@pytest.mark.parametrize("missing", sorted(CASES))
def test_a_missing_extra_is_named_with_its_install_command(missing: str, tmp_path: Path) -> None:
    code, user, extra = CASES[missing]
    (tmp_path / missing).mkdir()
    (tmp_path / missing / "__init__.py").write_text(f"raise ImportError('no {missing} here')\n")
    env = {"PYTHONPATH": str(tmp_path), "PATH": ""}  # the package shadowed by one that fails
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120, check=False)  # fmt: skip
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1
    assert last == (f"ImportError: {user} needs the '{extra}' extra ({missing} is missing): "
                    f"pip install 'chaosops[{extra}]'"), done.stderr  # fmt: skip


def test_chaosops_serve_without_its_extra_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "openenv").mkdir()  # openenv as Python finds it missing
    (tmp_path / "openenv" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'openenv'\", name='openenv')\n"
    )
    env = {"PYTHONPATH": str(tmp_path), "PATH": ""}
    done = subprocess.run([sys.executable, "-m", "chaosops.cli", "serve", "--port", "0"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
                          check=False)  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("chaosops: error: chaosops serve needs the 'serve' extra (openenv is "
                           "missing): pip install 'chaosops[serve]'\n")  # fmt: skip
    assert not (tmp_path / "runs").exists()
