"""The repository stands alone: its code, docs and tests cite its own docs
(docs/world.md, docs/runtime.md), never the reference pages it was built from
nor a path beside the clone, which a clone does not have."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIPPED = {"runs", "node_modules", "build", "dist"}
TEXT = {".py", ".md", ".toml", ".html", ".js", ".css", ".txt", ".cfg"}
# The reference pages by name, or "SPEC" as a citation ("SPEC 9", "SPEC section
# 13", "SPEC:"); msgspec's names and "SPECIAL" are other words.
CITATION = re.compile(r"\b(?:SPEC|RUNTIME|STYLE)\.md\b|\bSPEC(?:\s+(?:section\s+)?\d|:)")
RELATIVE = re.compile(r"(?:\.\./)+[\w.-]*")  # a path that climbs: "../docs/x.md"


def _outside(path: Path, line: str) -> bool:
    """Whether ``line`` of ``path`` cites a reference page, or a relative path
    that leads out of the repository from the file's folder."""
    if CITATION.search(line):
        return True
    return any(
        not (path.parent / found).resolve().is_relative_to(ROOT) for found in RELATIVE.findall(line)
    )


def _texts() -> list[Path]:
    def kept(path: Path) -> bool:
        parts = path.relative_to(ROOT).parts
        hidden = any(part.startswith(".") or part.endswith(".egg-info") for part in parts)
        return path.suffix in TEXT and path.is_file() and not hidden and not SKIPPED & set(parts)

    return [path for path in sorted(ROOT.rglob("*")) if kept(path)]


def test_nothing_cites_a_page_outside_the_repository() -> None:
    files = _texts()
    assert any(path.name == "world.md" for path in files)  # the walk found the docs
    cited = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}"
        for path in files
        if path.name != Path(__file__).name
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _outside(path, line)
    ]
    assert cited == []


def test_each_kind_of_citation_is_found() -> None:
    readme, doc = ROOT / "README.md", ROOT / "docs" / "cli.md"
    for line in ("see SPEC.md", "(SPEC section 13)", "SPEC 9 exposes", "SPEC: step()",
                 "RUNTIME.md says", "in ../reference/pages"):  # fmt: skip
        assert _outside(readme, line), line
    assert _outside(doc, "[the rules](../../reference/world.md)")  # two levels up from docs/
    for line in ("_MSGSPEC.encode(value)", "SPECIAL = []", "docs/world.md"):
        assert not _outside(readme, line), line
    assert not _outside(doc, "[the figures](../benchmarks/README.md)")  # inside the clone
