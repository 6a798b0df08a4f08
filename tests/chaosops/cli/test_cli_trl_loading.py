"""The Python that the README and docs/trajectories.md give for loading
trajectories, run as written with the real ``datasets`` on run folders the
command wrote: a scripted run, and an LLM run (the mock, answering through a
tool with token ids and logprobs) that fills the token fields."""

from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path
from typing import Any

import pytest

from ..._needs import needs
from ._cli import TINY, chaosops, jsonl, llm_run

ROOT = Path(__file__).resolve().parents[3]
LLM_OPTIONS = ("--episodes-per-type", "1", "--llm-answer", "tools", "--llm-top-logprobs", "2",
               "--llm-extra-body", '{"return_token_ids": true}')  # fmt: skip


def _loading_blocks(doc: str) -> list[str]:
    """The Python blocks of ``doc`` that call ``load_dataset``."""
    text = (ROOT / doc).read_text()
    return [
        code for code in re.findall(r"```python\n(.*?)```", text, re.S) if "load_dataset" in code
    ]


@pytest.fixture(scope="module")
def runs(work: Path, mock_llm: str) -> Path:
    """A folder holding ``runs/heuristic`` and ``runs/llm``, as the docs name them."""
    root = work / "loading"
    proc = chaosops("run", *TINY, "--out", root / "runs" / "heuristic", cwd=work)
    assert proc.returncode == 0, proc.stderr
    proc = chaosops(*llm_run(work, mock_llm, root / "runs" / "llm", *LLM_OPTIONS), cwd=work)
    assert proc.returncode == 0, proc.stderr
    return root


def _load(code: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``ds`` as ``code`` leaves it, run in ``folder`` with no network and a cache of its own."""
    needs(importlib.util.find_spec("datasets"), "datasets", "pip install -e '.[test]'")
    monkeypatch.chdir(folder)
    monkeypatch.setenv("HF_HOME", str(folder / ".hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    namespace: dict[str, Any] = {}
    exec(compile(code, "<the docs' code>", "exec"), namespace)
    return namespace["ds"]


def _same(loaded: Any, written: Any) -> bool:
    """Equal, floats to the last bits (the JSON reader may round the 17th digit)."""
    if isinstance(written, float):
        return math.isclose(loaded, written, rel_tol=1e-15)
    if isinstance(written, list):
        return len(loaded) == len(written) and all(map(_same, loaded, written))
    if isinstance(written, dict):
        return loaded.keys() == written.keys() and all(
            _same(loaded[k], written[k]) for k in written
        )
    return bool(loaded == written)


@pytest.mark.parametrize("played", ["heuristic", "llm"])
@pytest.mark.parametrize(
    ("doc", "block"), [("README.md", 0), ("docs/trajectories.md", 0)], ids=["readme", "docs"]
)
def test_a_run_loads_as_a_trl_conversational_dataset(
    runs: Path, played: str, doc: str, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    latest = runs / "runs" / "latest"
    latest.unlink(missing_ok=True)
    latest.symlink_to(played)
    ds = _load(_loading_blocks(doc)[block], runs, monkeypatch)
    records = jsonl(latest / "trajectories.jsonl")
    kept = [
        r for r in records
        if r["completion"] is not None and r["parse_error"] is None
        and r["finish_reason"] != "length"
    ]  # fmt: skip
    assert len(ds) == len(kept) > 0
    assert set(ds.column_names) == set(records[0])  # every field is kept
    for row, record in zip(ds, kept, strict=True):
        assert row["prompt"] == record["prompt"]
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
        assert row["completion"] == [{"role": "assistant", "content": record["completion"]}]
        assert row["episode_id"] == record["episode_id"] and row["turn"] == record["turn"]


def test_two_runs_load_together_with_every_column_typed(
    runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (code,) = [c for c in _loading_blocks("docs/trajectories.md") if "features=" in c]
    ds = _load(code, runs, monkeypatch)
    written = [
        *jsonl(runs / "runs" / "heuristic" / "trajectories.jsonl"),
        *jsonl(runs / "runs" / "llm" / "trajectories.jsonl"),
    ]
    assert len(ds) == len(written)
    assert ds.column_names == list(written[0])
    llm = [r for r in written if r["policy"] == "llm"]
    assert llm and all(r["tool_calls"] and r["top_logprobs"] and r["token_ids"] for r in llm)
    for row, record in zip(ds, written, strict=True):
        differ = [key for key in record if not _same(row[key], record[key])]
        assert differ == [], (record["episode_id"], record["turn"], differ)
