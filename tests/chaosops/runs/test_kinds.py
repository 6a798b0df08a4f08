"""A policy kind is declared once: beside its own package, the local model
kind (``hf``, the second kind) is named only where kinds are declared, and
everything else (run files, run.json, resume, players) reads the registry."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from chaosops.agents.hf.settings import HFSettings
from chaosops.agents.llm.settings import LLMSettings
from chaosops.cli._run_file import RunFileError, read_run_file
from chaosops.runs.kinds import KINDS, kind_of
from chaosops.runs.options import OPTIONS, flags_of
from chaosops.runs.spec import RunSpec

ROOT = Path(__file__).resolve().parents[3]
DECLARING = {"chaosops/runs/kinds.py", "chaosops/runs/models.py", "chaosops/runs/options.py"}


def _names_the_local_kind(path: Path) -> list[int]:
    """Lines of ``path`` that name the hf kind: its name, its types, its package."""
    hits = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        named = (
            (isinstance(node, ast.Constant) and node.value == "hf")
            or (isinstance(node, ast.Name) and node.id.startswith("HF"))
            or (isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "chaosops.agents.hf"))
        )  # fmt: skip
        if named:
            hits.append(getattr(node, "lineno", 0))
    return hits


def test_the_local_model_kind_is_named_only_where_kinds_are_declared() -> None:
    own = ROOT / "chaosops" / "agents" / "hf"
    users = ROOT / "chaosops" / "train"  # the trainer's callback plays the kind's policy
    found = {
        str(path.relative_to(ROOT)): lines
        for path in (ROOT / "chaosops").rglob("*.py")
        if own not in path.parents and users not in path.parents
        if (lines := _names_the_local_kind(path))
    }
    assert set(found) - DECLARING == set(), found
    assert "chaosops/runs/kinds.py" in found  # the check sees a declaration


def test_every_kind_has_its_own_model_flags_and_a_distinct_record() -> None:
    assert len({kind.recorded for kind in KINDS}) == len({kind.name for kind in KINDS}) == 2
    for kind in KINDS:
        fields = {field for field, _, _ in flags_of(kind.name)}
        assert "model" in fields, kind.name
        assert set(kind.decides) - {"weights"} <= fields, kind.name
    sets = [option.sets for option in OPTIONS if option.sets]
    assert all(kind in {k.name for k in KINDS} for kind, _ in sets)


def test_players_and_the_models_in_play_come_from_the_kinds() -> None:
    config = RunSpec(
        policies=("heuristic",),
        role_policies=(("sre", "small"), ("dev", "remote")),
        models=(("llm", LLMSettings(model="chaosops-mock")),
                ("small", HFSettings(model="/models/small", weights="abc", resolved_device="cpu")),
                ("remote", LLMSettings(model="served"))),
    )  # fmt: skip
    assert list(config.models_in_play) == ["small", "remote"]  # turn order: sre before dev
    assert config.models_played == "/models/small+served"
    assert config.players["sre"] == {
        "policy": "small", "model": "/models/small", "answer": "auto",
        "weights": "abc", "dtype": "auto", "device": "cpu",
    }  # fmt: skip
    assert config.players["dev"] == {"policy": "remote", "model": "served", "answer": "auto"}
    assert config.players["manager"] == {"policy": "heuristic", "model": None}
    assert [kind_of(s).name for s in config.models_in_play.values()] == ["hf", "llm"]
    assert config.in_play(HFSettings) == {"small": config.model_settings("small")}


@pytest.mark.parametrize(
    ("tables", "where"),
    [
        ('[llm.twin]\nmodel = "m"\n[hf.twin]\nmodel = "/m"\n', "hf.twin"),  # two kinds' tables
        ('[hf.llm]\nmodel = "/m"\n', "hf.llm"),  # another kind's own name
        ('[llm.hf]\nmodel = "m"\n', "llm.hf"),
        ('[hf.heuristic]\nmodel = "/m"\n', "hf.heuristic"),  # a scripted policy's
    ],
)
def test_a_models_name_is_its_own_across_kinds(tmp_path: Path, tables: str, where: str) -> None:
    run_file = tmp_path / "run.toml"
    run_file.write_text(tables)
    with pytest.raises(RunFileError) as caught:
        read_run_file(run_file)
    said = str(caught.value)
    assert len(said.splitlines()) == 1
    assert f"{run_file}: {where}: " in said and "not a scripted policy's nor another kind's" in said
