"""Import direction: actors never imports chaosops; the world imports no async
code; no cycle; imports at the top of modules, but for heavy or optional ones."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ASYNC_MODULES = {"anyio", "asyncio", "trio", "actors"}


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for all the checks."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(_tree(path)):
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
        assert not any(
            isinstance(n, ast.AsyncFunctionDef | ast.Await | ast.AsyncFor | ast.AsyncWith)
            for n in ast.walk(_tree(path))
        ), path


def _package_imports(path: Path) -> set[str]:
    """The modules of this project ``path`` imports, anywhere in it (dotted
    names), those under ``TYPE_CHECKING`` included: a cycle of types is a cycle
    of ideas, whether or not it runs."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_import_cycle_between_modules() -> None:
    modules = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts): p for p in _files("actors", "chaosops")
    }
    graph = {
        name: {m for m in _package_imports(path) if m in modules and m != name}
        for name, path in modules.items()
    }
    for name in graph:  # packages' __init__ re-exports are not cycles of their modules
        if name.endswith("__init__"):
            graph[name] = set()
    seen: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> None:
        if seen.get(name) == 2:
            return
        assert seen.get(name) != 1, "import cycle: " + " -> ".join([*trail, name])
        seen[name] = 1
        for imported in sorted(graph[name]):
            visit(imported, [*trail, name])
        seen[name] = 2

    for name in sorted(graph):
        visit(name, [])


# The packages of chaosops, lowest first: each imports only from those before
# it (and itself). Modules at the top of chaosops/ count as packages of their own.
PACKAGE_ORDER = (
    "__init__", "_extras", "_urls", "_toml", "_otlp", "untrusted", "stats",
    "env",  # the world: its rules, rewards and what an episode returns
    "rewards", "curriculum", "scenarios",
    "agents",  # policies, the runner, the LLM policy
    "mock_llm", "outputs", "samples", "evaluation", "pairing", "role_figures", "summary",
    "runs",  # the run engine: spec, plan, folder, batches, replay
    "incidents",  # what the harness adapters share: the rows, their handles, figures
    "serve", "train", "inspect", "viewer",
    "cli", "_entry",
)  # fmt: skip


def _package_of(module: str) -> str:
    return module.split(".")[1] if module.count(".") else "__init__"


def test_packages_import_only_the_packages_below_them() -> None:
    rank = {name: i for i, name in enumerate(PACKAGE_ORDER)}
    tops = {
        p.name.removesuffix(".py") if p.parent.name == "chaosops" else p.parent.name
        for p in (ROOT / "chaosops").glob("*")
        if p.suffix == ".py" or (p / "__init__.py").is_file()
    }
    assert tops <= set(rank), f"packages missing from PACKAGE_ORDER: {sorted(tops - set(rank))}"
    upward = set()
    for path in _files("chaosops"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        own = parts[1] if len(parts) > 2 else parts[-1]
        for module in _package_imports(path):
            if module.startswith("chaosops.") and module.count(".") >= 1:
                other = _package_of(module)
                if other in rank and rank[other] > rank[own]:
                    upward.add(f"{path.relative_to(ROOT)} imports {other}")
    assert sorted(upward) == []


def _mutable_literal(value: ast.expr | None) -> bool:
    """A list, dict or set display (empty or not), or one made by a call of
    list(), dict(), set(), defaultdict() or Counter()."""
    if isinstance(value, ast.List | ast.Dict | ast.Set | ast.ListComp | ast.DictComp | ast.SetComp):
        return True
    if isinstance(value, ast.Call):
        name = ast.unparse(value.func).rsplit(".", 1)[-1]
        return name in {
            "list",
            "dict",
            "set",
            "defaultdict",
            "Counter",
            "OrderedDict",
            "deque",
            "WeakKeyDictionary",
            "WeakValueDictionary",
            "WeakSet",
        }
    return False


# Module state that is the process's by nature, each with its reason.
PROCESS_STATE = {
    "actors/_gc.py: global",  # the interpreter's collector is one per process
    "actors/_ids.py: global",  # ids unique in the process, reseeded in a forked child
    "chaosops/agents/llm/parse.py:ACTION_SCHEMA",  # a JSON document HTTP clients serialise
    "chaosops/agents/seated.py:_engines",  # the seated episodes' one loop, per process
}


def test_no_module_keeps_mutable_state_at_its_top_level() -> None:
    offenders = []
    for path in _files("actors", "chaosops"):
        tree = _tree(path)
        if any(isinstance(n, ast.Global) for n in ast.walk(tree)):
            offenders.append(f"{path.relative_to(ROOT)}: global")
        for node in tree.body:
            if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
                continue
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if ast.unparse(target) == "__all__":
                continue
            if _mutable_literal(node.value):
                offenders.append(f"{path.relative_to(ROOT)}:{ast.unparse(target)}")
    assert sorted(set(offenders) - PROCESS_STATE) == []


def test_the_mutable_state_check_sees_empty_containers() -> None:
    for text in ("CACHE = {}", "SEEN = []", "X: set[int] = set()", "D = defaultdict(list)"):
        assert _mutable_literal(_value(text)), text
    for text in ("T = ()", "F = frozenset()", "M = MappingProxyType({})", "N = 3"):
        assert not _mutable_literal(_value(text)), text


def _value(text: str) -> ast.expr | None:
    node = ast.parse(text).body[0]
    assert isinstance(node, ast.Assign | ast.AnnAssign)
    return node.value


def test_no_module_imports_another_modules_private_names() -> None:
    # a private module of one's own package is its own business (``from actors
    # import _logging`` in actors/); a private name of another module is not
    offenders = []
    for path in _files("actors", "chaosops"):
        package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
        for node in ast.walk(_tree(path)):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if module.split(".")[0] not in ("actors", "chaosops"):
                continue
            parts = module.split(".")
            first = next(
                (i for i, p in enumerate(parts) if p.startswith("_") and not p.endswith("__")), None
            )
            owner = ".".join(parts[:first]) if first is not None else None
            private_names = [
                a.name for a in node.names if a.name.startswith("_") and not a.name.endswith("__")
            ]
            if owner is not None and package != owner and not package.startswith(owner + "."):
                offenders.append(f"{path.relative_to(ROOT)}: {module}")
            if private_names and (module != package):
                offenders.append(f"{path.relative_to(ROOT)}: {module} {private_names}")
    assert offenders == []


# What a function may import for itself: a heavy or optional dependency (or a
# module of ours that loads one), so that importing the module stays cheap and
# works without the extra.
LAZY_IMPORTS = (
    "ray",  # the ray extra
    "openenv", "chaosops.serve", "chaosops.train.remote",  # the serve extra
    "datasets", "matplotlib", "opentelemetry",  # the train, plot and otel extras
    "chaosops.train.callback",  # a transformers TrainerCallback: the train extra
    "uvloop", "fcntl",  # not on every platform
    "uvicorn", "starlette", "chaosops.viewer.web", "prometheus_client",  # slow to import
    "chaosops.mock_llm", "chaosops.agents.llm.policy", "chaosops.agents.llm.http",  # load those
    "chaosops.cli",  # the command itself, loaded by the console script once Ctrl-C is handled
)  # fmt: skip


def _reason_given(lines: list[str], lineno: int) -> bool:
    """A comment on the import's line, on another import of its run, or on the
    line above the run (blank lines may part the run's imports)."""
    index = lineno - 1  # the import's own line
    while index >= 0:
        line = lines[index].strip()
        if "#" in line:
            return True
        if line and not line.startswith(("import ", "from ")):
            return False
        index -= 1
    return False


def test_imports_inside_functions_are_heavy_or_optional_ones_with_a_reason() -> None:
    offenders = []
    for path in _files("actors", "chaosops"):
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(_tree(path)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import):
                    names = [alias.name for alias in inner.names]
                elif isinstance(inner, ast.ImportFrom):  # a relative one is never lazy
                    names = ["." * inner.level + (inner.module or "")]
                else:
                    continue
                lazy = all(
                    any(n == m or n.startswith(m + ".") for m in LAZY_IMPORTS) for n in names
                )
                if not lazy or not _reason_given(lines, inner.lineno):
                    offenders.append(f"{path.relative_to(ROOT)}:{inner.lineno} {', '.join(names)}")
    assert not offenders, "imports inside functions: " + "; ".join(sorted(set(offenders)))


def _texts(path: Path) -> list[str]:
    """The string constants of a module, f-strings' parts included; not its
    documentation (docstrings, and the strings standing alone after a name)."""
    tree = _tree(path)
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and id(node) not in docstrings
    ]  # fmt: skip


def test_the_libraries_messages_name_no_flag_of_the_command() -> None:
    # A library says what is wrong; the command line adds the flag to use. The
    # options' table names its options by field ({resume}): the command makes the flags.
    from chaosops.cli._flags import flags
    from chaosops.runs.options import OPTIONS

    every = {flag for option in OPTIONS for flag in flags(option)} | {"--policies"}
    assert {"--ray", "--resume", "--llm-max-failures", "--seed-offset"} <= every
    libraries = _files("actors", "chaosops/outputs", "chaosops/agents", "chaosops/runs")
    named = {
        (str(path.relative_to(ROOT)), flag)
        for path in libraries
        for text in _texts(path)
        for flag in every
        if re.search(re.escape(flag) + r"(?![\w-])", text)
    }
    assert named == set()


def test_the_run_engine_builds_no_command_line() -> None:
    importing = {
        str(path.relative_to(ROOT))
        for path in _files("chaosops/runs")
        if "argparse" in _imports(path)
    }
    assert importing == set()
