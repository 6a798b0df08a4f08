"""Fixtures shared by the CLI tests (module-scoped: one per test module)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ._cli import TINY_SUITE, mock_process


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli")
    (path / "tiny.toml").write_text(TINY_SUITE)
    return path


@pytest.fixture(scope="module")
def mock_llm(work: Path) -> Iterator[str]:
    """A slowed-down mock LLM server in its own process; yields its base URL."""
    with mock_process(work, "--latency", "80ms") as url:
        yield url
