"""The verifiers environment (``environments/chaosops_vf``) passes its own
tests, in its own virtual environment: verifiers 0.4 needs ``openai<3`` and
this suite's extra pins ``openai>=3.54``, so the two never share one. The
README's test command makes that environment, ``.venv-vf``, before the suite."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ._needs import needs

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "environments" / "chaosops_vf"
PYTHON = ROOT / ".venv-vf" / "bin" / "python"
INSTALL = (
    "python3 -m venv .venv-vf && .venv-vf/bin/pip install -e . -e 'environments/chaosops_vf[test]'"
)


@pytest.mark.timeout(2400)  # the bound of its subprocess, not pytest's default
def test_the_verifiers_environment_passes_its_own_tests() -> None:
    needs(PYTHON.is_file(), "the verifiers environment .venv-vf", INSTALL)
    proc = subprocess.run(
        [str(PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=PACKAGE, capture_output=True, text=True, timeout=2100,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-2000:]
