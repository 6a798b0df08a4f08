"""Token ids and logprobs from the LLM policy, asked for on the command line
(``--llm-logprobs``, ``--llm-top-logprobs``, ``--llm-extra-body``) and recorded
in ``trajectories.jsonl``."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from chaosops.agents.llm import moves_for
from chaosops.agents.llm.request import request_params
from chaosops.agents.policies import oracle_policy
from chaosops.cli import build_parser
from chaosops.cli._config import config_from_args
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import FailureType
from chaosops.env.world_sim import Scenario
from chaosops.outputs import trajectory_records

from ..test_outputs import play
from ._cli import (
    assert_one_error_line,
    chaosops,
    jsonl,
    llm_run,
)

TOKEN_FIELDS = ("logprobs", "tokens", "token_ids", "prompt_token_ids")


def _trajectories(folder: Path, url: str, name: str, *extra: str) -> list[dict[str, Any]]:
    """Run the tiny suite (one episode per failure type) with the LLM policy."""
    out = folder / name
    proc = chaosops(*llm_run(folder, url, out, "--episodes-per-type", "1", *extra), cwd=folder)
    assert proc.returncode == 0, proc.stderr
    records = jsonl(out / "trajectories.jsonl")
    assert len(records) >= 2
    assert all(r["policy"] == "llm" and r["completion"] for r in records)
    return records


@pytest.mark.parametrize(
    ("name", "extra", "fields"),
    [
        pytest.param("none", (), set(), id="none-without-the-options"),
        pytest.param("logprobs", ("--llm-logprobs",), {"logprobs", "tokens"}, id="logprobs"),
        pytest.param(
            "logprobs-token-ids",
            ("--llm-logprobs", "--llm-extra-body", '{"return_token_ids": true}'),
            {"logprobs", "tokens", "token_ids"},
            id="logprobs+return_token_ids",
        ),
        pytest.param(
            "top-logprobs-as-ids",
            ("--llm-top-logprobs", "0", "--llm-extra-body", '{"return_tokens_as_token_ids": 1}'),
            {"logprobs", "token_ids"},
            id="top_logprobs+return_tokens_as_token_ids",
        ),
    ],
)
def test_llm_token_data_is_recorded(
    work: Path,
    mock_llm: str,
    name: str,
    extra: tuple[str, ...],
    fields: set[str],
) -> None:
    for record in _trajectories(work, mock_llm, f"tokens-{name}", *extra):
        assert {f for f in TOKEN_FIELDS if record[f] is not None} == fields, record
        assert record["usage"]["completion_tokens"] > 0
        # the mock's answer is whole (not cut at --max-tokens), and who answered
        assert (record["finish_reason"], record["model"]) == ("stop", "chaosops-mock")
        for field in fields:  # one entry per completion token
            assert len(record[field]) == record["usage"]["completion_tokens"], field
        if "logprobs" in fields:
            assert all(isinstance(x, float) and x <= 0 for x in record["logprobs"])
        if "tokens" in fields:
            assert all(isinstance(t, str) for t in record["tokens"])
            assert "".join(record["tokens"]) == record["completion"]
        if "token_ids" in fields:
            assert all(isinstance(t, int) for t in record["token_ids"])


@pytest.mark.parametrize("value", ["[1]", "{bad", '"text"', "null", "3", ""])
@pytest.mark.parametrize("command", ["run", "eval"])
def test_bad_llm_extra_body_gets_one_line(
    work: Path,
    command: str,
    value: str,
) -> None:
    out = work / f"bad-extra-body-{command}"
    proc = chaosops(command, "--llm-extra-body", value, "--out", out, cwd=work)
    assert proc.returncode == 2
    assert_one_error_line(proc, "--llm-extra-body", repr(value), "JSON object")
    assert not out.exists()


@pytest.mark.parametrize("value", ["-1", "two"])
def test_bad_llm_top_logprobs_gets_one_line(
    work: Path,
    value: str,
) -> None:
    proc = chaosops("run", "--llm-top-logprobs", value, "--out", work / "bad-top", cwd=work)
    assert proc.returncode == 2
    assert_one_error_line(proc, "--llm-top-logprobs", repr(value), "from 0 to 20")


def _request(*argv: str) -> dict[str, Any]:
    """The request fields the LLM policy built from ``chaosops run ARGV`` sends."""
    args = build_parser().parse_args(["run", "--policy", "llm", *argv])
    obs = ChaosOpsEnvironment().reset(seed=0)
    settings = config_from_args(args).spec.model_settings("llm")
    return request_params(settings, "text", [], moves_for(obs))


def test_options_reach_the_request() -> None:
    plain = _request()
    assert not {"logprobs", "top_logprobs", "return_token_ids"} & plain.keys()
    assert _request("--llm-logprobs")["logprobs"] is True
    assert "top_logprobs" not in _request("--llm-logprobs")
    top = _request("--llm-top-logprobs", "5")  # implies --llm-logprobs
    assert top["logprobs"] is True and top["top_logprobs"] == 5
    extra = _request("--llm-extra-body", '{"return_token_ids": true, "top_k": 20}')
    assert extra["return_token_ids"] is True and extra["top_k"] == 20
    assert "logprobs" not in extra


def test_trajectory_records_copy_tokens_and_prompt_token_ids() -> None:
    scenario = Scenario.from_type(FailureType.DB_DEADLOCK, seed=0)
    result = play(scenario, oracle_policy(scenario.failure_type), "ep-tokens")
    first = result.steps[0]
    first.info = {
        "completion": "{}",
        "tokens": ["{", "}"],
        "logprobs": [-0.1, -0.2],
        "prompt_token_ids": [7, 8, 9],
    }
    nones = SimpleNamespace(**{**vars(first), "info": {"tokens": None, "prompt_token_ids": None}})
    result.steps = [first, nones]
    with_tokens, without = trajectory_records(result, policy="llm", key="k")
    assert with_tokens["tokens"] == ["{", "}"]
    assert with_tokens["prompt_token_ids"] == [7, 8, 9]
    assert with_tokens["logprobs"] == [-0.1, -0.2]
    assert with_tokens["token_ids"] is None
    assert without.keys() == with_tokens.keys()  # the same columns in every record
    assert all(without[f] is None for f in ("tokens", "prompt_token_ids", "logprobs"))
