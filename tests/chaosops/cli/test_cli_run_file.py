"""Run files (``--config run.toml``): named LLMs per role through two mock
servers serving different models, what each output records of them, flags over
the file, history sent as earlier messages, and bad files refused in one line."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from chaosops.agents.llm.negotiate import PROBE_TOKENS

from ._cli import (
    TIMEOUT,
    TINY,
    assert_one_error_line,
    chaosops,
    cli_env,
    command,
    jsonl,
    killed_run,
    mock_process,
)

KEY = "sk-run-file-secret-77"


@pytest.fixture(scope="module")
def two_mocks(work: Path) -> Iterator[tuple[str, str]]:
    """Mocks serving the models ``alpha`` (which wants :data:`KEY`) and ``beta``,
    each recording what it received in ``<model>.jsonl``."""
    env_key = "ALPHA_KEY_FOR_MOCK"
    os.environ[env_key] = KEY  # read by the spawned mock; gone after the module
    try:
        with (
            mock_process(work, "--model", "alpha", "--record", "alpha.jsonl",
                         "--require-api-key", env_key) as alpha,
            mock_process(work, "--model", "beta", "--record", "beta.jsonl") as beta,
        ):  # fmt: skip
            yield alpha, beta
    finally:
        del os.environ[env_key]


def _write_run_file(work: Path, name: str, alpha: str, beta: str, episodes: int = 1) -> Path:
    path = work / name
    path.write_text(
        f"""\
paths = ["tiny.toml"]
episodes_per_type = {episodes}
concurrency = 2
policy = "random"

[roles]
oversight = "alpha"
dev = "beta"

[llm.alpha]
base_url = "{alpha}"
model = "alpha"
api_key_env = "ALPHA_KEY"
temperature = 0.3
top_p = 0.9
seed = 11
max_tokens = 200

[llm.beta]
base_url = "{beta}"
model = "beta"
answer = "json"
history = 2
"""
    )
    return path


def _run(work: Path, *args: str | Path, key: bool = True) -> subprocess.CompletedProcess[str]:
    env = cli_env()
    if key:
        env["ALPHA_KEY"] = KEY
    return subprocess.run(
        [command(), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        timeout=TIMEOUT,
        check=False,
    )


def _requests(work: Path, model: str) -> list[dict[str, Any]]:
    """The turns' requests a mock received (not the answer-format probes)."""
    path = work / f"{model}.jsonl"
    asked = jsonl(path) if path.exists() else []
    return [r for r in asked if r["max_tokens"] != PROBE_TOKENS]


def test_a_run_file_plays_each_role_s_llm_and_every_output_says_so(
    work: Path, two_mocks: tuple[str, str]
) -> None:
    alpha, beta = two_mocks
    run_file = _write_run_file(work, "two-models.toml", alpha, beta)
    before = {m: len(_requests(work, m)) for m in ("alpha", "beta")}
    out = work / "two-models"
    proc = _run(work, "run", "--config", run_file, "--no-progress", "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert KEY not in proc.stdout + proc.stderr

    alpha_asked = _requests(work, "alpha")[before["alpha"] :]
    beta_asked = _requests(work, "beta")[before["beta"] :]
    assert alpha_asked and beta_asked
    assert {r["model"] for r in alpha_asked} == {"alpha"}
    assert all(
        r["temperature"] == 0.3 and r["top_p"] == 0.9 and r["seed"] == 11 for r in alpha_asked
    )
    assert all(r["max_tokens"] == 200 for r in alpha_asked)
    assert all(r["response_format"]["type"] == "json_schema" for r in beta_asked)

    players = {
        "sre": {"policy": "random", "model": None},
        "oversight": {"policy": "alpha", "model": "alpha", "answer": "json"},
        "dev": {"policy": "beta", "model": "beta", "answer": "json"},
        "manager": {"policy": "random", "model": None},
    }
    results = jsonl(out / "results.jsonl")
    assert len(results) == 2
    assert all(
        r["roles"] == players and r["policy"] == "random+oversight=alpha+dev=beta" for r in results
    )
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["players"] == players
    assert summary["llms"]["alpha"]["top_p"] == 0.9
    assert summary["llms"]["alpha"]["api_key_env"] == "ALPHA_KEY"
    assert summary["llms"]["beta"]["history"] == 2
    by_role = {f["role"]: f for f in summary["roles"]}
    assert by_role["oversight"]["model"] == "alpha" and by_role["oversight"]["tokens"] > 0
    assert by_role["sre"]["tokens"] is None
    run = orjson.loads((out / "run.json").read_bytes())
    assert run["config_file"] == str(run_file)
    assert set(run["llms"]) == {"alpha", "beta"} and "api_key" not in run["llms"]["alpha"]
    for path in out.iterdir():
        assert KEY.encode() not in path.read_bytes(), path.name
    assert any(line.split()[:2] == ["oversight", "alpha"] for line in proc.stdout.splitlines())


def test_history_sends_the_role_s_own_last_turns(work: Path, two_mocks: tuple[str, str]) -> None:
    _, beta = two_mocks
    run_file = work / "history.toml"
    run_file.write_text(
        f'paths = ["tiny.toml"]\nepisodes_per_type = 3\npolicy = "random"\n\n'
        '[roles]\noversight = "beta"\n\n'
        f'[llm.beta]\nbase_url = "{beta}"\nmodel = "beta"\nhistory = 2\n'
    )
    before = len(_requests(work, "beta"))
    out = work / "history"
    proc = _run(work, "run", "--config", run_file, "--no-progress", "--out", out,
                "--concurrency", "1")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    asked = _requests(work, "beta")[before:]
    trajectories = [t for t in jsonl(out / "trajectories.jsonl") if t["role"] == "oversight"]
    assert len(asked) == len(trajectories)  # one request per turn, in order (concurrency 1)
    seen: dict[tuple[str, str], list[tuple[str, str]]] = {}  # (episode, role) -> (view, answer)
    for request, turn in zip(asked, trajectories, strict=True):
        past = seen.setdefault((turn["episode_id"], turn["role"]), [])
        expected = [
            m
            for view, answer in past[-2:]
            for m in ({"role": "user", "content": view}, {"role": "assistant", "content": answer})
        ]
        assert request["messages"][1:-1] == expected  # its own last two turns, in order
        assert turn["prompt"] == request["messages"]  # the trajectory records what was sent
        past.append((request["messages"][-1]["content"], turn["completion"]))
    assert max(len(r["messages"]) for r in asked) == 6  # two earlier turns at most


def test_flags_override_the_run_file(work: Path, two_mocks: tuple[str, str]) -> None:
    alpha, beta = two_mocks
    run_file = _write_run_file(work, "override.toml", alpha, beta)
    out = work / "override"
    proc = _run(work, "run", "--config", run_file, "--no-progress", "--out", out,
                "--role-policy", "dev=oracle", "--limit", "1")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (result,) = jsonl(out / "results.jsonl")
    assert result["roles"]["dev"] == {"policy": "oracle", "model": None}
    assert result["roles"]["oversight"] == {"policy": "alpha", "model": "alpha", "answer": "json"}
    run = orjson.loads((out / "run.json").read_bytes())
    assert run["limit"] == 1 and run["role_policies"] == {"oversight": "alpha", "dev": "oracle"}


def test_resume_of_a_run_file_s_run_needs_only_the_folder(
    work: Path, two_mocks: tuple[str, str]
) -> None:
    alpha, beta = two_mocks
    # 40 episodes one at a time: the kill lands well before the last (the mocks answer at once)
    run_file = _write_run_file(work, "resume.toml", alpha, beta, episodes=20)
    out = work / "resume-run-file"
    env_args = ("run", "--config", run_file, "--no-progress", "--out", out, "--concurrency", "1")
    os.environ["ALPHA_KEY"] = KEY
    try:
        killed_run(*env_args, cwd=work, out=out, after=2)
    finally:
        del os.environ["ALPHA_KEY"]
    assert 2 <= len(jsonl(out / "results.jsonl")) < 40
    resumed = _run(work, "run", "--resume", "--out", out, "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    results = jsonl(out / "results.jsonl")
    assert len(results) == 40 and len({r["run_key"] for r in results}) == 40
    assert all(r["roles"]["oversight"]["model"] == "alpha" for r in results)
    refused = _run(work, "run", "--resume", "--out", out, "--role-policy", "dev=oracle")
    assert_one_error_line(refused, "--role-policy", "differs")
    run_file.write_text(run_file.read_text().replace("history = 2", "history = 3"))
    edited = _run(work, "run", "--resume", "--out", out, "--config", run_file)
    assert_one_error_line(edited, "llm.beta.history differs", "recorded 2, given 3")


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        pytest.param(
            "polcy = 'oracle'\n",
            ["polcy", "unknown key", "did you mean 'policy'"],
            id="unknown-field",
        ),
        pytest.param(
            "concurrency = 0\n", ["concurrency", "expected an integer >= 1", "got 0"], id="range"
        ),
        pytest.param("policy = 'gemma'\n", ["policy", "'gemma'", "module:attribute"], id="policy"),
        pytest.param("[roles]\nceo = 'oracle'\n", ["roles.ceo"], id="role"),
        pytest.param(
            "[llm.g]\nmodel = 'g'\napi_key = 'sk-x'\n", ["llm.g.api_key", "api_key_env"], id="key"
        ),
        pytest.param("[llm.oracle]\nmodel = 'g'\n", ["llm.oracle", "scripted"], id="llm-name"),
        pytest.param("[llm.g]\nbase_url = 'x'\n", ["llm.g.model", "Field required"], id="no-model"),
        pytest.param(
            "[llm.g]\nmodel = 'g'\nanswer = 'xml'\n",
            ["llm.g.answer", "one of auto", "text", "'xml'"],
            id="answer",
        ),
        pytest.param(
            "[llm.g]\nmodel = 'g'\napi_key_env = 'NO_SUCH_VAR_X'\n",
            ["llm.g.api_key_env", "NO_SUCH_VAR_X", "not set"],
            id="key-env-unset",
        ),
        pytest.param("policy = [\n", ["invalid TOML"], id="toml"),
        pytest.param(
            "policy = 'g'\n[llm.g]\nmodel = 'g'\nbase_url = 'localhost:8000/v1'\n",
            ["llm.g.base_url", "'localhost:8000/v1'", "http(s) URL"],
            id="base-url",
        ),
        pytest.param("a = " + "[" * 600 + "]" * 600 + "\n", ["nested too deeply"], id="deep"),
    ],
)
def test_a_bad_run_file_is_one_line_naming_the_file_and_field(
    work: Path, text: str, needles: list[str]
) -> None:
    path = work / "bad.toml"
    path.write_text(text)
    out = work / "bad-run-file"
    proc = chaosops("run", "--config", path, "--no-progress", "--out", out, cwd=work)
    assert proc.returncode == 2
    assert_one_error_line(proc, str(path), *needles)
    assert not out.exists()


def test_a_run_file_that_is_not_a_file_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.toml")  # reading it would block
    cases = {"fifo.toml": "not a regular file", "nope.toml": "no such file", ".": "is a folder"}
    for name, needle in cases.items():
        proc = chaosops("run", "--config", tmp_path / name, "--no-progress", cwd=tmp_path)
        assert_one_error_line(proc, str(tmp_path), needle)


def test_a_policy_flag_naming_no_llm_is_refused(work: Path) -> None:
    before = sorted(work.iterdir())
    proc = chaosops("run", "--policy", "gemma", "--no-progress", cwd=work)
    assert_one_error_line(proc, "--policy gemma", "unknown policy")
    assert sorted(work.iterdir()) == before


def _model_file(work: Path, name: str, url: str, model: str, extra: str = "") -> Path:
    path = work / f"{name}.toml"
    path.write_text(
        f'paths = ["tiny.toml"]\nepisodes_per_type = 1\npolicy = "random"\n{extra}\n'
        f'[roles]\noversight = "{model}"\ndev = "{model}"\n\n'
        f'[llm.{model}]\nbase_url = "{url}"\nmodel = "{model}"\n'
        + ('api_key_env = "ALPHA_KEY"\n' if model == "alpha" else "")
    )
    return path


def test_eval_compares_two_run_files_with_a_run_folder_each(
    work: Path, two_mocks: tuple[str, str]
) -> None:
    alpha, beta = two_mocks
    files = [_model_file(work, "cmp-a", alpha, "alpha"), _model_file(work, "cmp-b", beta, "beta")]
    out = work / "compare"
    proc = _run(work, "eval", "--config", files[0], "--config", files[1], "--no-progress",
                "--out", out)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = orjson.loads((out / "eval.json").read_bytes())
    assert data["policies"] == ["cmp-a", "cmp-b"]
    assert {r["policy"] for r in data["rows"]} == {"cmp-a", "cmp-b"}
    entries = {e["policy"]: e for e in data["entries"]}
    assert entries["cmp-a"]["players"]["dev"] == {"policy": "alpha", "model": "alpha",
                                                  "answer": "json"}  # fmt: skip
    assert entries["cmp-b"]["llms"]["beta"]["model"] == "beta"
    for name, model in (("cmp-a", "alpha"), ("cmp-b", "beta")):
        folder = out / name
        assert entries[name]["folder"] == str(folder)
        results = jsonl(folder / "results.jsonl")
        assert len(results) == 2 and all(r["policy"] == name for r in results)
        assert all(r["roles"]["dev"]["model"] == model for r in results)
        assert len(jsonl(folder / "trajectories.jsonl")) == sum(len(r["steps"]) for r in results)
        again = _run(work, "run", "--resume", "--out", folder, "--no-progress")
        assert again.returncode == 0, again.stderr
        assert "2 of 2 episodes already done" in again.stderr
        replayed = chaosops("replay", folder, cwd=work)
        assert replayed.returncode == 0, replayed.stderr
    table = proc.stdout.split("turns by role")[0]
    assert "cmp-a" in table and "cmp-b" in table
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        pass
    else:
        assert (out / "eval_reward_by_tier.png").read_bytes()[:4] == b"\x89PNG"


def test_eval_entries_must_plan_alike_and_be_named_apart(
    work: Path, two_mocks: tuple[str, str]
) -> None:
    alpha, beta = two_mocks
    one = _model_file(work, "plan-a", alpha, "alpha")
    other = _model_file(work, "plan-b", beta, "beta", extra="limit = 1")
    proc = _run(work, "eval", "--config", one, "--config", other, "--out", work / "unlike")
    assert_one_error_line(proc, "plan-b.toml", "plans other episodes", "same suites",
                          "plan-a.toml has memory_leak/easy/seed=97", "which")  # fmt: skip
    twin = work / "twin"
    twin.mkdir(exist_ok=True)
    same = _model_file(twin, "plan-a", beta, "beta")
    proc = _run(work, "eval", "--config", one, "--config", same, "--out", work / "twins")
    assert_one_error_line(proc, "two entries", "'plan-a'", "name")
    assert not (work / "unlike").exists() and not (work / "twins").exists()


def test_eval_takes_role_policies_over_each_policy(work: Path) -> None:
    out = work / "eval-roles"
    proc = chaosops("eval", "tiny.toml", "--episodes-per-type", "1", "--policies",
                    "random,heuristic", "--role-policy", "dev=oracle", "--no-progress",
                    "--no-chart", "--out", out, cwd=work)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = orjson.loads((out / "eval.json").read_bytes())
    assert data["policies"] == ["random+dev=oracle", "heuristic+dev=oracle"]
    for label in data["policies"]:
        results = jsonl(out / label / "results.jsonl")
        assert all(r["roles"]["dev"]["policy"] == "oracle" for r in results)


def test_the_example_run_file_runs(work: Path, mock_llm: str) -> None:
    example = Path(__file__).parents[3] / "examples" / "run.toml"
    scenarios = example.parent.parent / "scenarios"
    copy = work / "example.toml"
    copy.write_text(
        example.read_text()
        .replace("http://127.0.0.1:8000/v1", mock_llm)
        .replace('"../scenarios"', f'"{scenarios}"')
    )
    out = work / "example"
    proc = chaosops("run", "--config", copy, "--limit", "4", "--no-progress", "--out", out,
                    cwd=work)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = jsonl(out / "results.jsonl")
    assert len(results) == 4 and all(r["policy"] == "mock-sre" for r in results)
    assert results[0]["roles"]["sre"] == {"policy": "mock", "model": "chaosops-mock",
                                          "answer": "json"}  # fmt: skip
    assert results[0]["turn_timeout"]["sre"] == 20.0 and results[0]["turn_timeout"]["dev"] == 30.0


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[roles]\nceo = "oracle"\n', ["roles.ceo: no such key", "sre, oversight, dev, manager"]),
        ('tiers = "easy"\n', ["tiers: expected a list, e.g. tiers = ['easy']"]),
    ],
)
def test_a_run_file_key_or_list_that_is_wrong_says_what_is_expected(
    work: Path, text: str, said: list[str]
) -> None:
    (work / "wrong.toml").write_text('paths = ["tiny.toml"]\n' + text)
    done = chaosops("run", "--config", "wrong.toml", "--out", "wrong-out", cwd=work)
    assert_one_error_line(done, *said)


def test_eval_with_policy_names_policies(work: Path) -> None:
    done = chaosops("eval", "tiny.toml", "--policy", "oracle", cwd=work)
    assert_one_error_line(done, "--policies A,B", "not --policy")


def test_model_flags_no_role_plays_are_noted_not_ignored(work: Path) -> None:
    done = chaosops("run", *TINY, "--llm-model", "gpt", "--hf-batch", "4", "--out", "unused",
                    cwd=work)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "--llm-model given, but no role plays the llm policy" in done.stderr
    assert "--hf-batch given, but no role plays the hf policy" in done.stderr
    plain = chaosops("run", *TINY, "--out", "unused-not", cwd=work)
    assert "given, but no role plays" not in plain.stderr
