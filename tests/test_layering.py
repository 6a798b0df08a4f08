"""Import direction: actors never imports chaosops; the world imports no async code."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ASYNC_MODULES = {"anyio", "asyncio", "trio", "actors"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def _files(*folders: str) -> list[Path]:
    return [p for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))]


def test_actors_never_imports_chaosops() -> None:
    files = _files("actors")
    assert files
    offenders = [str(p.relative_to(ROOT)) for p in files if "chaosops" in _imports(p)]
    assert offenders == []


def test_world_imports_no_async_code() -> None:
    files = _files("chaosops/env", "chaosops/rewards", "chaosops/curriculum")
    assert any(p.name == "world_sim.py" for p in files)
    offenders = {
        str(p.relative_to(ROOT)): sorted(_imports(p) & ASYNC_MODULES)
        for p in files
        if _imports(p) & ASYNC_MODULES
    }
    assert offenders == {}


def test_world_has_no_async_defs() -> None:
    for path in _files("chaosops/env", "chaosops/rewards", "chaosops/curriculum"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert not any(
            isinstance(n, ast.AsyncFunctionDef | ast.Await | ast.AsyncFor | ast.AsyncWith)
            for n in ast.walk(tree)
        ), path
