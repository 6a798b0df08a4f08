"""The inspect_ai task ``chaosops/incident``: found by its entry point, played
on chaosops' runtime, logged and scored as inspect's users read them.

Offline: inspect's ``mockllm/model`` answers with the mock server's own player
(``chaosops.mock_llm.decide_action``), and ``inspect eval`` goes through
``openai-api/`` to ``chaosops mock-llm`` on loopback. Either way the outcomes
must be those of ``chaosops run`` against that server."""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from ..._needs import needs
from ..cli._cli import chaosops, cli_env, jsonl, mock_process

needs(importlib.util.find_spec("inspect_ai"), "inspect_ai", "pip install -e '.[inspect]'")

from inspect_ai import Epochs, eval  # noqa: E402
from inspect_ai.log import EvalLog, read_eval_log  # noqa: E402
from inspect_ai.model import ChatMessage, ModelOutput, ModelUsage, get_model  # noqa: E402

from chaosops.agents.llm import read_rendered  # noqa: E402
from chaosops.inspect import incident  # noqa: E402
from chaosops.mock_llm import decide_action  # noqa: E402

# inspect_ai 0.3.285 leaves memory streams of its own unclosed after an eval
# (a bare Task with its generate() does too). They are collected after each
# test here, so that the warning stays with these tests; on an xdist worker
# that collection also meets pipes an earlier test file left to the collector
pytestmark = [
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <function MemoryObjectReceiveStream.__del__"
        ":pytest.PytestUnraisableExceptionWarning"
    ),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <_io.FileIO:pytest.PytestUnraisableExceptionWarning"
    ),
]


@pytest.fixture(autouse=True)
def _collected() -> Iterator[None]:
    yield
    gc.collect()


SELECTION = ("-T", "tier=hard", "-T", "failure_type=misrouted_traffic,rogue_deploy_bot")


def _answer(messages: list[ChatMessage]) -> ModelOutput:
    """What ``chaosops mock-llm`` answers to this turn, as an inspect model output
    (with its usage given, so that inspect counts no tokens with a download)."""
    action = decide_action(read_rendered(messages[-1].text))
    output = ModelOutput.from_content("mockllm", json.dumps(action))
    output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
    return output


def _player(messages: list[ChatMessage], *_: Any) -> ModelOutput:
    return _answer(messages)


def _outcomes(records: list[dict[str, Any]]) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    return {
        (r["failure_type"], r["difficulty"], r["seed"]): (
            r["resolved"],
            r["cumulative_reward"],
            r["final_step"],
            r["wrong_fixes"],
            [(s["role"], s["action"]["action_type"]) for s in r["steps"]],
        )
        for r in records
    }


def _scores(log: EvalLog) -> dict[str, dict[str, float]]:
    """Each score's metrics by name (a dict score is one score per key)."""
    assert log.results is not None
    return {s.name: {m: v.value for m, v in s.metrics.items()} for s in log.results.scores}


def _played(log: EvalLog) -> list[dict[str, Any]]:
    assert log.status == "success", log.error
    assert log.samples is not None
    return [sample.metadata["chaosops"] for sample in log.samples]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with mock_process(tmp_path_factory.mktemp("mock")) as url:
        yield url


@pytest.fixture(scope="module")
def by_chaosops(server: str, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The selection played by ``chaosops run``: the SRE and the dev against the
    mock server, the other roles heuristic."""
    out = tmp_path_factory.mktemp("run") / "run"
    proc = chaosops(
        "run", "--policy", "heuristic", "--role-policy", "sre=llm", "--role-policy", "dev=llm",
        "--llm-base-url", server, "--tier", "hard", "--failure-type", "misrouted_traffic",
        "--failure-type", "rogue_deploy_bot", "--no-progress", "--out", out, cwd=out.parent,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return jsonl(out / "results.jsonl")


def test_mockllm_plays_the_same_episodes_as_chaosops_run(
    by_chaosops: list[dict[str, Any]], tmp_path: Path
) -> None:
    model = get_model("mockllm/model", custom_outputs=_player)
    task = incident(
        tier="hard", failure_type="misrouted_traffic,rogue_deploy_bot", models="sre,dev"
    )
    [log] = eval(task, model=model, log_dir=str(tmp_path), display="none")
    played = _played(log)
    assert len(played) == len(by_chaosops) == 10
    assert _outcomes(played) == _outcomes(by_chaosops)
    assert any(not r["resolved"] for r in played) or any(r["final_step"] > 1 for r in played)
    scores = _scores(log)
    share = sum(r["resolved"] for r in by_chaosops) / len(by_chaosops)
    assert scores["resolved"]["accuracy"] == pytest.approx(share)
    mean_return = sum(r["cumulative_reward"] for r in by_chaosops) / len(by_chaosops)
    assert scores["return"]["mean"] == pytest.approx(mean_return)
    assert scores["wrong_fixes"]["mean"] == pytest.approx(
        sum(r["wrong_fixes"] for r in by_chaosops) / len(by_chaosops)
    )


def test_inspect_eval_finds_the_task_and_logs_a_span_per_turn(
    server: str, by_chaosops: list[dict[str, Any]], tmp_path: Path
) -> None:
    env = {**cli_env(), "MOCK_BASE_URL": server, "MOCK_API_KEY": "EMPTY"}
    inspect = Path(sys.executable).parent / "inspect"
    proc = subprocess.run(
        [str(inspect), "eval", "chaosops/incident", "--model", "openai-api/mock/chaosops-mock",
         *SELECTION, "-T", "models=sre,dev", "--log-dir", str(tmp_path), "--display", "none"],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    [path] = tmp_path.glob("*.eval")
    log = read_eval_log(str(path))
    assert log.eval.task == "chaosops/incident"
    played = _played(log)
    assert _outcomes(played) == _outcomes(by_chaosops)
    assert log.samples is not None
    for sample, record in zip(log.samples, played, strict=True):
        assert sample.id == f"{record['failure_type']}/hard/seed={record['seed']}"
        turns = [e for e in sample.events if e.event == "span_begin" and e.type == "turn"]
        assert [t.name for t in turns] == [
            f"step {i}: {s['role']}" for i, s in enumerate(record["steps"])
        ]
        calls = [e for e in sample.events if e.event == "model"]
        assert len(calls) == sum(s["role"] in ("sre", "dev") for s in record["steps"])
        assert {s["played_by"] for s in record["steps"]} == {None}
        assert record["roles"]["sre"] == {
            "policy": "inspect",
            "model": "openai-api/mock/chaosops-mock",
        }


def test_a_late_model_turn_plays_the_fallback_and_the_episode_goes_on(tmp_path: Path) -> None:
    async def late_first(messages: list[ChatMessage], *_: Any) -> ModelOutput:
        if read_rendered(messages[-1].text).step == 0:
            await anyio.sleep(30)  # cancelled at the turn's deadline
        return _answer(messages)

    model = get_model("mockllm/model", custom_outputs=late_first)
    task = incident(tier="hard", failure_type="cascade", turn_timeout=1.0)
    [log] = eval(task, model=model, log_dir=str(tmp_path), display="none", limit=1)
    [record] = _played(log)
    first, *rest = record["steps"]
    assert (
        first["role"] == "sre" and first["timed_out"] and first["action"]["action_type"] == "noop"
    )
    assert rest and not any(s["timed_out"] for s in rest)
    [legal] = _scores(log)["legal_sre"].values()
    sre_turns = sum(s["role"] == "sre" for s in record["steps"])
    assert legal == pytest.approx((sre_turns - 1) / sre_turns)


def test_epochs_with_pass_at_k_sample_as_chaosops_samples(server: str, tmp_path: Path) -> None:
    model = get_model("mockllm/model", custom_outputs=_player)
    task = incident(tier="hard", failure_type="misrouted_traffic", others="random")
    [log] = eval(
        task, model=model, log_dir=str(tmp_path), display="none", limit=2,
        epochs=Epochs(3, ["mean", "pass_at_2"]),
    )  # fmt: skip
    played = _played(log)
    assert len(played) == 6
    moves = [json.dumps([s["action"] for s in r["steps"]]) for r in played]
    assert len(set(moves)) > 2  # each epoch its own seed of the random teammates
    proc = chaosops(
        "run", "--policy", "random", "--role-policy", "sre=llm", "--llm-base-url", server,
        "--tier", "hard", "--failure-type", "misrouted_traffic", "--limit", "2", "--samples", "3",
        "--no-progress", "--out", tmp_path / "run", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr

    def by_sample(records: list[dict[str, Any]]) -> dict[tuple[int, str], Any]:
        return {
            (r["seed"], r["run_key"].rsplit("#", 1)[1]): [s["action"] for s in r["steps"]]
            for r in records
        }

    assert by_sample(played) == by_sample(jsonl(tmp_path / "run" / "results.jsonl"))
    assert log.results is not None
    reducers = {s.reducer for s in log.results.scores if s.name == "resolved"}
    assert reducers == {"mean", "pass_at_2"}


@pytest.mark.parametrize(
    ("argument", "needle"),
    [
        ("tier=ultra", "-T tier='ultra': expected one of easy, medium, hard"),
        ("models=ceo", "-T models='ceo': expected one of sre, oversight, dev, manager"),
        ("others=smart", "-T others='smart': expected one of random, heuristic, oracle"),
        ("turn_timeout=0", "-T turn_timeout=0: expected a number of seconds above 0"),
    ],
)
def test_a_bad_task_argument_is_named(argument: str, needle: str, tmp_path: Path) -> None:
    inspect = Path(sys.executable).parent / "inspect"
    proc = subprocess.run(
        [str(inspect), "eval", "chaosops/incident", "--model", "mockllm/model", "-T", argument,
         "--log-dir", str(tmp_path), "--display", "none"],
        capture_output=True, text=True, env={**cli_env(), **os.environ}, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    assert needle in proc.stdout + proc.stderr


def test_a_model_role_plays_its_own_seat_and_its_junk_is_judged(tmp_path: Path) -> None:
    """``--model-role dev=...`` gives the dev its own model; an answer that is no
    move plays the fallback and counts as not legal."""

    def junk(*_: Any) -> ModelOutput:
        output = ModelOutput.from_content("mockllm", "I would look at the logs first.")
        output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
        return output

    task = incident(tier="hard", failure_type="misrouted_traffic", models="sre,dev")
    dev_model = get_model("mockllm/junk", custom_outputs=junk)
    [log] = eval(
        task, model=get_model("mockllm/model", custom_outputs=_player), log_dir=str(tmp_path),
        display="none", limit=2, model_roles={"dev": dev_model},
    )  # fmt: skip
    for record in _played(log):
        assert record["roles"]["dev"] == {"policy": "inspect", "model": "mockllm/junk"}
        dev = [s for s in record["steps"] if s["role"] == "dev"]
        assert dev and all(s["parse_error"] and s["action"]["action_type"] == "noop" for s in dev)
        sre = [s for s in record["steps"] if s["role"] == "sre"]
        assert sre and not any(s["parse_error"] for s in sre)
    scores = _scores(log)
    assert list(scores["legal_dev"].values()) == [0.0]
    assert list(scores["legal_sre"].values()) == [1.0]
