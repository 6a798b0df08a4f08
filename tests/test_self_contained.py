"""The repository stands alone: its code, docs and tests cite its own docs
(docs/world.md, docs/runtime.md), never the reference pages it was built from,
which a clone does not have."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIPPED = {".git", ".venv", "runs", "node_modules", "build", "dist"}
TEXT = {".py", ".md", ".toml", ".html", ".js", ".css", ".txt", ".cfg"}
# The reference pages by name, a path beside the clone, or "SPEC" as a citation
# ("SPEC 9", "SPEC section 13", "SPEC:"); msgspec's names and "SPECIAL" are other words.
OUTSIDE = re.compile(
    r"\b(?:SPEC|RUNTIME|STYLE)\.md\b|\.\./shared\b|\bSPEC(?:\s+(?:section\s+)?\d|:)"
)


def _texts() -> list[Path]:
    return [
        path
        for path in sorted(ROOT.rglob("*"))
        if path.suffix in TEXT
        and path.is_file()
        and not SKIPPED & set(path.relative_to(ROOT).parts)
        and not any(part.startswith(".") or part.endswith(".egg-info") for part in path.parts)
    ]


def test_nothing_cites_a_page_outside_the_repository() -> None:
    files = _texts()
    assert any(path.name == "world.md" for path in files)  # the walk found the docs
    cited = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}"
        for path in files
        if path.name != Path(__file__).name
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert cited == []


def test_the_pattern_finds_each_kind_of_citation() -> None:
    for line in ("see SPEC.md", "(SPEC section 13)", "SPEC 9 exposes", "SPEC: step()",
                 "in ../shared", "RUNTIME.md says"):  # fmt: skip
        assert OUTSIDE.search(line), line
    for line in ("_MSGSPEC.encode(value)", "SPECIAL = []", "docs/world.md"):
        assert not OUTSIDE.search(line), line
