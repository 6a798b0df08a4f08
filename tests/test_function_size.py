"""A function fits on a screen: no function of the packages has a body (its
docstring left out) longer than SCREEN lines."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCREEN = 60
FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


def _body_lines(node: FunctionNode) -> int:
    body = node.body
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(body) > 1:
        first = body[1]  # the docstring is not code
    return (node.end_lineno or node.lineno) - first.lineno + 1


def _long_functions(source: str, name: str) -> list[str]:
    tree = ast.parse(source, filename=name)
    return [
        f"{name}:{node.lineno} {node.name} ({_body_lines(node)} lines)"
        for node in ast.walk(tree)
        if isinstance(node, FunctionNode) and _body_lines(node) > SCREEN
    ]


def test_every_function_fits_on_a_screen() -> None:
    files = [
        p for package in ("actors", "chaosops") for p in sorted((ROOT / package).rglob("*.py"))
    ]
    assert len(files) > 50
    long = [
        found
        for path in files
        for found in _long_functions(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert long == []


def test_a_long_function_is_found_and_its_docstring_is_not_counted() -> None:
    docstring = '    """' + "\n".join(["words"] * 100) + '"""\n'
    short = "def f():\n" + docstring + "    return 1\n"
    long = "async def g():\n" + "".join(f"    x{i} = {i}\n" for i in range(SCREEN + 1))
    assert _long_functions(short, "short.py") == []
    assert _long_functions(long, "long.py") == [f"long.py:1 g ({SCREEN + 1} lines)"]
