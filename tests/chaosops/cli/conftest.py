"""Fixtures shared by the CLI tests (module-scoped: one per test module)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ._cli import TINY_SUITE, spawn, stop


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli")
    (path / "tiny.toml").write_text(TINY_SUITE)
    return path


@pytest.fixture(scope="module")
def mock_llm(work: Path) -> Iterator[str]:
    """A slowed-down mock LLM server in its own process; yields its base URL."""
    proc = spawn("mock-llm", "--port", "0", "--latency", "80ms", cwd=work)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "http://" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
        yield line.split(" at ", 1)[1].split()[0]
    finally:
        stop(proc)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
