"""chaosops serve and chaosops run read the same options into the same
players, in the same order (the serve extra is not needed to build them)."""

from __future__ import annotations

from pathlib import Path

from chaosops.cli import build_parser
from chaosops.cli._config import config_from_args
from chaosops.cli._run_file import apply_run_file
from chaosops.cli._serve import _config as serve_config

RUN_RECORD = """
[llm.a]
model = "model-a"
base_url = "http://127.0.0.1:9/v1"

[llm.b]
model = "model-b"
base_url = "http://127.0.0.1:9/v1"
"""


def test_serve_and_run_name_the_same_players_in_turn_order(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(RUN_RECORD)
    roles = ["--role-policy", "dev=a", "--role-policy", "oversight=b"]
    argv = {
        "run": ["run", "--config", str(path), *roles, "--out", str(tmp_path / "run")],
        "serve": ["serve", "--config", str(path), *roles, "--out", str(tmp_path / "served")],
    }
    parsed = {name: apply_run_file(build_parser().parse_args(a), a) for name, a in argv.items()}
    run = config_from_args(parsed["run"]).spec
    served = serve_config(parsed["serve"], tmp_path / "served").spec
    assert (
        run.models_played == served.models_played == "model-b+model-a"
    )  # oversight plays before dev
    assert run.players == served.players
    assert list(served.players) == ["sre", "oversight", "dev", "manager"]
