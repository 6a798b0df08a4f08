"""Every seat's move goes through the one judge: a ``module:attribute`` policy
whose move is no legal move of the view plays the fallback, and its turns
count as illegal, as a model's answers do."""

from __future__ import annotations

import json
from pathlib import Path

from ._cli import TINY, chaosops, jsonl

CHEAT = """\
from chaosops.env.models import ChaosOpsAction


def policy(obs, role):
    return ChaosOpsAction(role=role, action_type="scale", target="payments",
                          args={"replicas": 10**9})


def fair(obs, role):
    return ChaosOpsAction(role=role, action_type="noop")


def factory(scenario):
    return {"sre": policy, "dev": fair}
"""


def test_an_illegal_move_from_a_python_policy_plays_the_fallback(work: Path) -> None:
    (work / "cheat.py").write_text(CHEAT)
    for spec, cheats in (("cheat:policy", {"sre", "oversight", "dev", "manager"}),
                         ("cheat:factory", {"sre"})):  # fmt: skip
        out = work / spec.replace(":", "-")
        done = chaosops("run", *TINY, "--policy", spec, "--out", out, cwd=work)
        assert done.returncode == 1, done.stderr  # a role that never played a move of its own
        assert "the sre (" in done.stderr and "never played a move of its own" in done.stderr
        steps = [s for r in jsonl(out / "results.jsonl") for s in r["steps"]]
        for step in steps:
            if step["role"] in cheats:
                assert step["action"]["action_type"] == "noop"
                assert "replicas" in step["parse_error"]  # the judge says why
            else:
                assert step["parse_error"] is None
        assert not any(r["resolved"] for r in jsonl(out / "results.jsonl"))
        roles = {f["role"]: f for f in json.loads((out / "summary.json").read_text())["roles"]}
        assert roles["sre"]["legal"] == 0 and roles["sre"]["parse_errors"] == roles["sre"]["turns"]


BIDI = """\
from chaosops.env.models import ChaosOpsAction


def policy(obs, role):
    return ChaosOpsAction(role=role, action_type="communicate",
                          args={"message": "ok \\u202etxt.exe", "to": "all"})
"""


def test_bidi_controls_are_shown_escaped_in_a_transcript(work: Path) -> None:
    (work / "bidi.py").write_text(BIDI)
    out = work / "bidi-run"
    chaosops("run", *TINY, "--role-policy", "sre=bidi:policy", "--out", out, cwd=work)
    episode = jsonl(out / "results.jsonl")[0]["episode_id"]
    shown = chaosops("transcript", out, "--episode", episode, cwd=work)
    assert shown.returncode == 0, shown.stderr
    assert "\\u202etxt.exe" in shown.stdout and "\u202e" not in shown.stdout
