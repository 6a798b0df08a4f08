"""A policy kind is declared once: beside its own package, the local model
kind (``hf``, the second kind) is named only where kinds are declared, and
everything else (run files, run.json, resume, players) reads the registry."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from chaosops.agents.hf.settings import HFSettings
from chaosops.agents.llm.settings import LLMSettings
from chaosops.agents.model import ModelPolicy, ModelSettings
from chaosops.cli._errors import as_flag
from chaosops.cli._run_file import RunFileError, read_run_file
from chaosops.env.models import AgentRole, ChaosOpsAction
from chaosops.env.world_sim import Scenario
from chaosops.runs import kinds
from chaosops.runs.kinds import KINDS, ModelKind, kind_of, ray_refusal
from chaosops.runs.options import OPTIONS, own_settings
from chaosops.runs.policies import PolicyRecipe
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
        fields = {field for field, _ in own_settings(kind.name)}
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


def _policy_of(kind_name: str, tmp_path: Path) -> Any:
    """A policy of the kind: an LLM's (nothing is asked of its endpoint), a
    tiny local checkpoint's."""
    if kind_name == "llm":
        from chaosops.agents.llm.policy import LLMPolicy

        return LLMPolicy("chaosops-mock", base_url="http://127.0.0.1:9/v1")
    pytest.importorskip("torch", reason="the hf extra (torch) is not installed")
    pytest.importorskip("trl", reason="the tiny model's chat template comes with TRL")
    from chaosops.agents.hf import HFPolicy
    from chaosops.train.tiny import write_tiny_checkpoint

    return HFPolicy.load(HFSettings(model=str(write_tiny_checkpoint(tmp_path / "m", width=32))))


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.name)
def test_every_kind_s_policy_and_settings_follow_the_model_protocols(
    kind: Any, tmp_path: Path
) -> None:
    policy = _policy_of(kind.name, tmp_path)
    assert isinstance(policy, ModelPolicy)
    assert isinstance(policy.settings, kind.settings)
    assert isinstance(policy.settings, ModelSettings)
    assert dataclasses.is_dataclass(kind.settings)
    assert policy.notes() == [] and policy.failures_in_a_row == 0
    assert (kind.build is None) == (kind.not_on_ray is not None)  # built on Ray, or why not


@dataclasses.dataclass(frozen=True)
class _EchoSettings:
    model: str
    max_in_flight: int = 8


class _Echo:
    """A third kind's policy: every turn a noop."""

    calls = "echo calls"

    def __init__(self, settings: _EchoSettings) -> None:
        self.settings, self.model = settings, settings.model
        self.failures_in_a_row, self.last_failure = 0, None

    def notes(self) -> list[str]:
        return []

    def for_episode(self) -> _Echo:
        return self

    async def aclose(self) -> None:
        pass

    async def __call__(self, obs: Any, role: Any) -> ChaosOpsAction:
        return ChaosOpsAction(role=role, action_type="noop")


def test_a_ray_worker_builds_any_kind_from_its_declaration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    echo = ModelKind(
        "echo", "an echo", _EchoSettings, "echoes", ("model",), prepare=lambda *a: {},
        build=_Echo, share=lambda s, n: dataclasses.replace(s, max_in_flight=s.max_in_flight // n),
    )  # fmt: skip
    monkeypatch.setattr(kinds, "KINDS", (*KINDS, echo))
    recipe = PolicyRecipe.of({"sre": "echo", "dev": "heuristic"}, {"echo": _EchoSettings("e")}, 2)
    assert recipe.models == (("echo", _EchoSettings("e", max_in_flight=4)),)  # its share
    worker = recipe()  # what each Ray worker calls
    roles = worker(Scenario.from_type("db_deadlock", seed=0))
    assert isinstance(roles[AgentRole.SRE], _Echo) and isinstance(roles[AgentRole.SRE], ModelPolicy)


def test_a_kind_that_does_not_play_on_ray_says_why() -> None:
    for kind in KINDS:
        settings = kind.settings(model="m")
        why = ray_refusal("mine", settings)
        assert (why is None) == (kind.build is not None)
        if why is not None:
            assert why.fields == ("ray", "policy")  # the setting at fault first
            assert str(why).startswith("ray: the mine policy ")  # Python's words
            shown = why.say(as_flag)  # the command line's
            assert shown.startswith("--ray: the mine policy ") and "--policy llm" in shown
            assert kind.not_on_ray is not None and kind.not_on_ray.say(as_flag) in shown
