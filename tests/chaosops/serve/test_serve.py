"""`chaosops serve` through the installed command, a real server on loopback,
and OpenEnv's own clients."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaosops.env.models import FailureType
from chaosops.viewer.index import RunIndex
from tests._needs import needs

from ..cli._cli import assert_one_error_line, chaosops, jsonl, mock_process, spawn, stop
from ._local import oracle_episode

try:
    from openenv.core.generic_client import GenericEnvClient
    from websockets.sync.client import connect

    from chaosops.serve.client import ChaosOpsClient
    from chaosops.serve.env import TurnAction
except ImportError:  # pragma: no cover - the test extra installs openenv
    GenericEnvClient = None


def _needs_openenv() -> None:
    needs(GenericEnvClient, "openenv", "pip install -e '.[test]' (or the 'serve' extra)")


@pytest.fixture(autouse=True)
def _openenv() -> None:
    _needs_openenv()


def _start(tmp_path: Path, *options: str) -> tuple[subprocess.Popen[str], str]:
    proc = spawn("serve", "--port", "0", "--out", tmp_path / "served", *options, cwd=tmp_path)
    line = proc.stdout.readline()
    if not line.startswith("chaosops serve: OpenEnv environment at "):
        stop(proc)  # reaped before the test fails
        raise AssertionError((line, proc.communicate()[1]))
    return proc, line.split(" at ", 1)[1].split(" ,", 1)[0]


def _stop(proc: subprocess.Popen[str], stop: int = signal.SIGINT) -> str:
    """Ctrl-C (or ``stop``): the server stops, exit 128 + the signal (130 for
    Ctrl-C); what it said on stderr."""
    proc.send_signal(stop)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 128 + stop, err
    return err


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One server for the tests that need only its URL: each opens and closes
    sessions of its own (room for far more than any test holds at once)."""
    _needs_openenv()  # before the server: without openenv the tests skip, not fail
    proc, url = _start(tmp_path_factory.mktemp("shared"), "--max-sessions", "32")
    yield url
    _stop(proc)


@pytest.mark.parametrize("failure", [FailureType.DB_DEADLOCK, FailureType.ROGUE_DEPLOY_BOT])
def test_an_episode_through_the_server_equals_it_played_locally(server: str, failure) -> None:
    turns, local = oracle_episode(failure)
    with GenericEnvClient(base_url=server).sync() as env:
        result = env.reset(failure_type=failure.value, difficulty="hard", seed=4)
        for turn in turns:
            assert result.observation["role"] == turn.seen.turn_role.value
            assert result.observation["turn"] == turn.seen.step
            assert result.observation["view"] == turn.seen.view.model_dump(mode="json")
            result = env.step({"turn": result.observation["turn"], **turn.move.model_dump(
                mode="json", include={"action_type", "target", "args"})})  # fmt: skip
            assert result.reward == pytest.approx(turn.reward)
        assert result.done and result.observation["terminated"] == local.state.resolved
        state = env.state()
        assert state["cumulative_reward"] == pytest.approx(local.state.cumulative_reward)


def test_the_typed_client_plays_one_role_and_the_server_the_others(server: str) -> None:
    with ChaosOpsClient(base_url=server).sync() as env:
        result = env.reset(failure_type="memory_leak", seed=2, roles=["dev"], max_steps=8)
        total = result.reward
        while not result.done:
            assert result.observation.role == "dev"
            result = env.step(TurnAction(turn=result.observation.turn, action_type="noop"))
            total += result.reward
        assert total == pytest.approx(env.state().cumulative_reward)
        assert result.observation.terminated != result.observation.truncated


def test_a_step_for_another_turn_or_an_illegal_move_is_refused_and_not_applied(
    server: str,
) -> None:
    with GenericEnvClient(base_url=server).sync() as env:
        with pytest.raises(RuntimeError, match="NO_EPISODE"):
            env.step({"turn": 0, "action_type": "noop"})
        env.reset(failure_type="db_deadlock", seed=0, roles=["sre"])
        with pytest.raises(RuntimeError, match="WRONG_TURN: this step answers turn 3"):
            env.step({"turn": 3, "action_type": "noop"})
        with pytest.raises(RuntimeError, match="ILLEGAL_MOVE: flag_rogue is the oversight's"):
            env.step({"turn": 0, "action_type": "flag_rogue", "target": "deploy_bot"})
        with pytest.raises(RuntimeError, match="UNKNOWN_ROLE"):
            env.reset(roles=["chef"])
        assert env.state()["step_count"] == 0  # nothing refused was applied
        result = env.step({"turn": 0, "action_type": "restart", "target": "db"})
        assert result.done and result.reward > 0
        with pytest.raises(RuntimeError, match="EPISODE_OVER"):
            env.step({"turn": 1, "action_type": "noop"})


def test_bad_messages_are_answered_and_the_session_goes_on(server: str) -> None:
    with connect(server.replace("http", "ws", 1) + "/ws") as ws:
        for raw, code in (("{not json", "INVALID_JSON"), ('{"type": "dance"}', "UNKNOWN_TYPE"),
                          ('{"type": "step", "data": {"turn": 0, "action_type": "noop",'
                           ' "colour": "red"}}', "EXECUTION_ERROR"),
                          ("[]", "VALIDATION_ERROR"), ("5", "VALIDATION_ERROR"),
                          ('"reset"', "VALIDATION_ERROR")):  # fmt: skip
            ws.send(raw)
            answer = json.loads(ws.recv(timeout=10))
            assert answer["type"] == "error" and answer["data"]["code"] == code, answer
            if raw.startswith('{"type": "step"'):
                assert answer["data"]["message"] == (
                    "BAD_ACTION: unknown field 'colour'; a step takes turn, action_type, "
                    "target and args"
                )
            if code == "VALIDATION_ERROR":
                assert answer["data"]["message"].startswith("a message is a JSON object")
        ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"difficutly": "hard"}, "BAD_RESET: unknown field 'difficutly'; reset takes failure_type"),
        ({"roles": "sre"}, "UNKNOWN_ROLE: roles 'sre': a list of role names"),
        ({"max_steps": 0}, "BAD_SCENARIO: max_steps: Input should be greater than or equal to 1"),
        ({"max_steps": 10**9}, "BAD_SCENARIO: max_steps: Input should be less than or equal"),
        ({"seed": -1}, "BAD_SCENARIO: seed: Input should be greater than or equal to 0 (got -1)"),
        ({"seed": 2**70}, "BAD_SCENARIO: seed: Input should be less than or equal to"),
        ({"seed": "abc"}, "BAD_SCENARIO: seed: Input should be a valid integer (got 'abc')"),
        ({"failure_type": "db_dedlock"}, "valid: db_deadlock, memory_leak, bad_config_push"),
        ({"roles": []}, "UNKNOWN_ROLE: roles []: name at least one role"),
        ({"episode_id": "x" * 3_000_000}, "BAD_RESET: episode_id 'xxxxxxx"),
    ],
)
def test_a_reset_out_of_bounds_is_one_line_naming_the_field(server: str, fields, said) -> None:
    with GenericEnvClient(base_url=server).sync() as env:
        with pytest.raises(RuntimeError) as refused:
            env.reset(**fields)
        assert said in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("step", "said"),
    [
        ({"turn": 0, "action_type": "fly"}, "BAD_ACTION: action_type 'fly': one of noop,"),
        ({"action_type": "noop"}, "BAD_ACTION: turn missing: the observation's turn, an integer"),
        ({"turn": "0", "action_type": "noop"}, "BAD_ACTION: turn '0': the observation's turn"),
        ({"turn": 0, "action_type": "noop", "why": 1}, "BAD_ACTION: unknown field 'why'"),
        ({"turn": 0, "action_type": "noop", "args": [1]}, "BAD_ACTION: args [1]: an object"),
    ],
)
def test_a_step_the_schema_refuses_is_one_line_naming_the_field(server: str, step, said) -> None:
    with GenericEnvClient(base_url=server).sync() as env:
        env.reset(failure_type="db_deadlock", roles=["sre"])
        with pytest.raises(RuntimeError, match=re.escape(said)):
            env.step(step)
        assert env.state()["step_count"] == 0


def test_the_stateless_http_routes_are_not_served(server: str) -> None:
    # a fresh environment a request: an HTTP reset would open an episode no step reaches
    for route in ("/reset", "/step", "/state"):
        request = urllib.request.Request(server + route, data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        refused.value.close()
        assert refused.value.code in (404, 405), route


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def test_the_task_api_lists_the_canonical_suites_and_a_reset_plays_a_task(server: str) -> None:
    from chaosops.scenarios import canonical_suite_paths, load_scenarios

    with urllib.request.urlopen(server + "/chaosops/splits", timeout=10) as answer:
        splits = [split["name"] for split in json.loads(answer.read())]
    assert splits == ["easy", "medium", "hard", "canonical"]
    hard = load_scenarios(canonical_suite_paths()[2])
    assert _post(server + "/chaosops/num_tasks", {"split": "hard"}) == {"num_tasks": len(hard)}
    assert _post(server + "/chaosops/num_tasks", {"split": "canonical"})["num_tasks"] == 55
    task = _post(server + "/chaosops/task", {"split": "hard", "index": 3})["task"]
    assert task["id"] == f"{hard[3].failure_type}/hard/seed={hard[3].seed}"
    every = _post(server + "/chaosops/task_range", {"split": "hard"})["tasks"]
    assert [t["index"] for t in every] == list(range(len(hard))) and every[3] == task
    for body, code in (({"split": "hard", "index": 99}, 400), ({"split": "bogus"}, 404)):
        route = "/chaosops/task" if "index" in body else "/chaosops/num_tasks"
        with pytest.raises(urllib.error.HTTPError) as refused:
            _post(server + route, body)
        refused.value.close()
        assert refused.value.code == code
    with GenericEnvClient(base_url=server).sync() as env:
        by_task = env.reset(split="hard", index=3, roles=["sre"]).observation
        by_fields = env.reset(failure_type=task["failure_type"], difficulty="hard",
                              seed=task["seed"], roles=["sre"]).observation  # fmt: skip
        assert by_task["view"] == by_fields["view"] and by_task["message"] == by_fields["message"]
        for bad, said in (
            ({"split": "hard", "index": 99}, "index 99: 0 to 19"),
            ({"split": "hard", "index": 0, "seed": 4}, "give no other field"),
        ):
            with pytest.raises(RuntimeError, match=re.escape(said)):
                env.reset(**bad)


def test_a_scenario_without_max_steps_is_the_tiers_everywhere(server: str) -> None:
    from chaosops.train.pettingzoo import aec_env
    from chaosops.train.trl import ChaosOpsToolEnv

    for tier, steps in (("easy", 12), ("medium", 18), ("hard", 25)):
        with GenericEnvClient(base_url=server).sync() as env:
            result = env.reset(failure_type="cascade", difficulty=tier, seed=128, roles=["sre"])
            assert f"; {steps} steps to resolve" in result.observation["message"]
        aec = aec_env(failure_type="cascade", difficulty=tier)
        aec.reset(seed=128)
        assert aec.env.state.max_steps == steps
        with ChaosOpsToolEnv() as tools:
            tools.reset(failure_type="cascade", difficulty=tier, seed=128)
            assert tools._scenario.max_steps == steps


def test_capacity_is_answered_at_once(tmp_path: Path) -> None:
    proc, url = _start(tmp_path, "--max-sessions", "1")
    try:
        with GenericEnvClient(base_url=url).sync() as first:
            first.reset()
            with pytest.raises(Exception, match=r"CAPACITY_REACHED|capacity"):
                with GenericEnvClient(base_url=url).sync() as second:
                    second.reset()
    finally:
        _stop(proc)


def test_a_folder_that_holds_a_run_is_one_line_and_kept(tmp_path: Path) -> None:
    ran = chaosops("run", "--limit", "2", "--no-progress", "--out", "earlier", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    before = {p.name: p.read_bytes() for p in (tmp_path / "earlier").iterdir()}
    done = chaosops("serve", "--port", "0", "--out", "earlier", cwd=tmp_path)
    line = assert_one_error_line(done, "earlier already holds results.jsonl", "a new --out")
    assert done.returncode == 2 and "--resume" not in line  # serve has no --resume
    assert {p.name: p.read_bytes() for p in (tmp_path / "earlier").iterdir()} == before


def test_a_served_folder_records_its_players_and_is_not_resumed(tmp_path: Path) -> None:
    """run.json, written by the run engine's folder: who plays the roles clients
    leave and their deadlines, no plan; ``run --resume`` and a second server
    refuse the folder in one line, before any episode, and leave it as it is."""
    (tmp_path / "run.toml").write_text('policy = "oracle"\n\n[roles]\ndev = "random"\n')
    proc, _ = _start(tmp_path, "--config", "run.toml", "--role-timeout", "sre=2.5")
    _stop(proc)
    out = tmp_path / "served"
    record = json.loads((out / "run.json").read_text())
    assert record["served"] is True and "plan" not in record and "planned" not in record
    assert (record["policy"], record["role_policies"]) == ("oracle", {"dev": "random"})
    assert (record["role_timeout"], record["config_file"]) == ({"sre": 2.5}, "run.toml")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    resumed = chaosops("run", "--resume", "--out", "served", cwd=tmp_path)
    assert_one_error_line(resumed, "served was written by chaosops serve", "cannot resume it")
    again = chaosops("serve", "--port", "0", "--out", "served", cwd=tmp_path)
    assert_one_error_line(again, "served already holds run.json", "a new --out folder")
    assert resumed.returncode == again.returncode == 2
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_an_llm_the_server_cannot_reach_is_one_line(tmp_path: Path) -> None:
    done = chaosops("serve", "--policy", "llm", "--llm-base-url", "http://127.0.0.1:9/v1",
                    cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1 and "cannot reach the LLM endpoint" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_an_llm_plays_a_role_on_the_server_and_the_log_follows_the_episode(
    tmp_path: Path,
) -> None:
    with mock_process(tmp_path, "--latency", "30ms") as llm:
        (tmp_path / "run.toml").write_text(
            f'policy = "heuristic"\n\n[roles]\ndev = "mock"\n\n[role_timeout]\ndev = 20.0\n\n'
            f'[llm.mock]\nbase_url = "{llm}"\nmodel = "chaosops-mock"\n'
        )
        proc, url = _start(tmp_path, "--config", tmp_path / "run.toml")
        try:
            with GenericEnvClient(base_url=url).sync() as env:
                result = env.reset(failure_type="rogue_deploy_bot", seed=1, roles=["sre"],
                                   max_steps=8)  # fmt: skip
                index = RunIndex(tmp_path / "served")  # what `chaosops watch` follows
                assert list(index.in_flight) == [result.observation["episode_id"]]
                while not result.done:
                    result = env.step({"turn": result.observation["turn"],
                                       "action_type": "noop"})  # fmt: skip
        finally:
            _stop(proc)
    (record,) = jsonl(tmp_path / "served" / "results.jsonl")
    # as `chaosops run` records it: the answer format the server settled (the mock takes all)
    assert record["roles"]["dev"] == {"policy": "mock", "model": "chaosops-mock",
                                      "answer": "json"}  # fmt: skip
    dev = [step for step in record["steps"] if step["role"] == "dev"]
    assert dev and not any(step["timed_out"] or step["error"] for step in dev)
    events = jsonl(tmp_path / "served" / "log.jsonl")
    turns = [e for e in events if e["event"] == "turn" and e["role"] == "dev"]
    assert len(turns) == len(dev) and all(e["latency_ms"] >= 30 for e in turns)
    assert [e["event"] for e in events].count("episode_finished") == 1


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_served_episodes_are_a_run_folder_the_viewer_reads(tmp_path: Path, stop: int) -> None:
    """Whichever way the server is stopped (Ctrl-C, or SIGTERM as systemd and
    Kubernetes send it), what it served is written whole, summary.json included."""
    proc, url = _start(tmp_path)
    try:
        with GenericEnvClient(base_url=url).sync() as env:
            for seed in (0, 1):
                result = env.reset(failure_type="db_deadlock", seed=seed, roles=["sre"])
                result = env.step({"turn": result.observation["turn"], "action_type": "noop"})
                while not result.done:
                    obs = result.observation
                    result = env.step({"turn": obs["turn"], "action_type": "restart",
                                       "target": "db"})  # fmt: skip
    finally:
        _stop(proc, stop)
    out = tmp_path / "served"
    results = jsonl(out / "results.jsonl")
    assert [r["policy"] for r in results] == ["served", "served"]
    assert results[0]["roles"]["sre"]["policy"] == "client"
    assert results[0]["roles"]["dev"]["policy"] == "heuristic"
    assert all(r["terminated"] for r in results)
    steps = jsonl(out / "trajectories.jsonl")
    assert len(steps) == sum(len(r["steps"]) for r in results)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 2
    shown = chaosops("transcript", out, "--episode", results[1]["episode_id"], cwd=tmp_path)
    assert shown.returncode == 0 and "restart" in shown.stdout, shown.stderr


def test_the_tool_environment_plays_a_served_world_as_it_plays_its_own(server: str) -> None:
    from chaosops.env.rules import IllegalMove
    from chaosops.train.trl import ChaosOpsToolEnv

    row = {"failure_type": "bad_config_push", "difficulty": "medium", "seed": 7, "role": "dev"}
    local, remote = ChaosOpsToolEnv(), ChaosOpsToolEnv(base_url=server)
    with local, remote:
        assert remote.reset(**row) == local.reset(**row)
        with pytest.raises(IllegalMove, match="flag_rogue is the oversight's"):
            remote.flag_rogue("deploy_bot")
        moves = iter([("rollback", "payments"), ("noop", None)] * 20)
        while not local.done:
            kind, target = next(moves)
            args = (target,) if target else ()
            assert getattr(remote, kind)(*args) == getattr(local, kind)(*args)
        assert remote.done and remote.get_reward() == pytest.approx(local.get_reward())
        with pytest.raises(IllegalMove, match="over"):
            remote.noop()


def test_a_closed_tool_environment_refuses_moves_alike_local_and_served(server: str) -> None:
    from chaosops.env.rules import IllegalMove
    from chaosops.train.trl import ChaosOpsToolEnv

    row = {"failure_type": "db_deadlock", "difficulty": "easy", "seed": 1, "role": "sre"}
    for env in (ChaosOpsToolEnv(), ChaosOpsToolEnv(base_url=server)):
        env.reset(**row)
        env.close()
        with pytest.raises(IllegalMove, match=r"no episode yet: reset\(\) first"):
            env.restart("db")
        assert env.reset(**row).startswith("ChaosOps incident, step 0")  # open again
        env.close()


def test_a_served_rollout_is_scored_whole_and_refuses_moves_out_of_bounds(server: str) -> None:
    from chaosops.train import IllegalMove
    from chaosops.train.trl import ChaosOpsToolEnv

    row = {"failure_type": "autoscaler_cost_cut", "difficulty": "hard", "seed": 3, "role": "sre"}
    local = ChaosOpsToolEnv(reward="credit")
    remote = ChaosOpsToolEnv(base_url=server, reward="credit")
    with local, remote:
        local.reset(**row)
        remote.reset(**row)
        with pytest.raises(IllegalMove, match="1 to 20, got 1000000000"):
            remote.scale("payments", 10**9)
        with pytest.raises(IllegalMove, match="1 to 200 characters, got 0"):
            remote.communicate("")
        # abandoned: played out with noops on both sides, the same whole episode
        assert remote.get_reward() == pytest.approx(local.get_reward()) == 0.0
        assert remote.done and remote.outcome.team_return == pytest.approx(
            local.outcome.team_return
        )
        assert remote.outcome.fallback_turns >= 1 and remote.outcome.legal_share == 0.0


def test_a_run_file_chooses_the_servers_policies(tmp_path: Path) -> None:
    (tmp_path / "run.toml").write_text('policy = "oracle"\n\n[roles]\ndev = "random"\n')
    proc, url = _start(tmp_path, "--config", tmp_path / "run.toml")
    try:
        with GenericEnvClient(base_url=url).sync() as env:
            result = env.reset(failure_type="memory_leak", seed=1, roles=["sre"], max_steps=4)
            while not result.done:
                result = env.step({"turn": result.observation["turn"], "action_type": "noop"})
    finally:
        _stop(proc)
    (record,) = jsonl(tmp_path / "served" / "results.jsonl")
    played = {role: fields["policy"] for role, fields in record["roles"].items()}
    assert played == {"sre": "client", "oversight": "oracle", "dev": "random", "manager": "oracle"}


def _until(check, seconds: float = 20.0):
    """``check()``'s first true value, asked every 50 ms for ``seconds`` at most."""
    deadline = time.monotonic() + seconds
    while not (value := check()):
        assert time.monotonic() < deadline, "never came"
        time.sleep(0.05)
    return value


async def _play(client, result, role: str, move: dict) -> list[float]:
    """Step ``move`` at each of the client's turns to the end; the rewards it got."""
    rewards = [result.reward]
    while not result.done:
        assert result.observation["role"] == role
        result = await client.step({"turn": result.observation["turn"], **move})
        rewards.append(result.reward)
    return rewards


@pytest.mark.asyncio
async def test_two_clients_play_their_roles_of_one_episode(tmp_path: Path) -> None:
    proc, url = _start(tmp_path)
    try:
        async with GenericEnvClient(base_url=url) as a, GenericEnvClient(base_url=url) as b:
            first = await a.reset(failure_type="disk_full", seed=2, roles=["sre"], max_steps=6)
            episode = first.observation["episode_id"]
            joined = asyncio.create_task(b.reset(join=episode, roles=["dev"]))
            for _ in range(200):  # the join is seen before the first move
                if "dev" in (await a.state())["clients"]:
                    break
                await asyncio.sleep(0.05)
            noop = {"action_type": "noop"}
            sre = asyncio.create_task(_play(a, first, "sre", noop))
            dev = await _play(b, await joined, "dev", noop)
            sre = await sre
            total = (await a.state())["cumulative_reward"]
        assert sum(sre) == pytest.approx(total) and sum(dev) == pytest.approx(total)
        with GenericEnvClient(base_url=url).sync() as c:
            with pytest.raises(RuntimeError, match=f"NO_SUCH_EPISODE: no open episode '{episode}'"):
                c.reset(join=episode)
    finally:
        _stop(proc)
    (record,) = jsonl(tmp_path / "served" / "results.jsonl")
    played = {role: fields["policy"] for role, fields in record["roles"].items()}
    assert played == {"sre": "client", "oversight": "heuristic", "dev": "client",
                      "manager": "heuristic"}  # fmt: skip
    moves = [step["role"] for step in record["steps"] if step["role"] in ("sre", "dev")]
    assert len(moves) == len(sre) - 1 + len(dev) - 1  # each client step applied once


def test_a_client_that_stalls_gets_the_fallback_then_its_session_is_closed(
    tmp_path: Path,
) -> None:
    proc, url = _start(tmp_path, "--client-timeout", "1", "--client-misses", "2")
    try:
        with GenericEnvClient(base_url=url).sync() as env:
            result = env.reset(
                failure_type="misrouted_traffic", seed=3, roles=["sre"], max_steps=24
            )
            session = result.observation["session"]
            time.sleep(1.5)  # turn 0 closes at its deadline: the server plays noop for it
            with pytest.raises(RuntimeError, match="WRONG_TURN: this step answers turn 0, "
                               "the open turn is 4"):  # fmt: skip
                env.step({"turn": 0, "action_type": "noop"})
            result = env.reset(session=session)  # the open turn's observation
            assert result.observation["turn"] == 4
            env.step({"turn": 4, "action_type": "noop"})  # a move in time: misses start again
            _until(lambda: env.state()["clients"] == [], seconds=30)  # two misses in a row
            with pytest.raises(RuntimeError, match="SESSION_CLOSED: CLIENT_TIMEOUT: missed 2"):
                env.step({"turn": 12, "action_type": "noop"})
    finally:
        _stop(proc)
    (record,) = jsonl(tmp_path / "served" / "results.jsonl")
    late = [step["turn"] for step in record["steps"] if step["timed_out"]]
    assert late == [0, 8, 12] and record["timeouts"] == 3
    # who played each step: the client's turns until its session closed, the server's after
    sre = {step["turn"]: step["played_by"] for step in record["steps"] if step["role"] == "sre"}
    assert sre == {0: "client", 4: "client", 8: "client", 12: "client", 16: "server",
                   20: "server"}, sre  # fmt: skip
    others = {step["played_by"] for step in record["steps"] if step["role"] != "sre"}
    assert others == {"server"}
    lines = jsonl(tmp_path / "served" / "trajectories.jsonl")
    assert [line["played_by"] for line in lines] == [step["played_by"] for step in record["steps"]]


def test_a_client_that_reconnects_continues_where_it_stood(tmp_path: Path) -> None:
    proc, url = _start(tmp_path, "--max-sessions", "1")
    try:
        with GenericEnvClient(base_url=url).sync() as env:
            result = env.reset(failure_type="rogue_deploy_bot", seed=5, roles=["sre"], max_steps=12)
            rewards = [result.reward]
            result = env.step({"turn": 0, "action_type": "noop"})
            rewards.append(result.reward)
            session, turn = result.observation["session"], result.observation["turn"]
        # the connection is gone, and its slot free: a new one gets the episode back
        with GenericEnvClient(base_url=url).sync() as env:
            result = env.reset(session=session)
            assert result.observation["turn"] == turn and result.reward == 0
            while not result.done:
                result = env.step({"turn": result.observation["turn"], "action_type": "noop"})
                rewards.append(result.reward)
            assert sum(rewards) == pytest.approx(env.state()["cumulative_reward"])
            with pytest.raises(RuntimeError, match="UNKNOWN_SESSION"):
                env.reset(session="nobody")
    finally:
        _stop(proc)


def test_openenv_validate_passes_its_live_checks(server: str, tmp_path: Path) -> None:
    validate = Path(sys.executable).with_name("openenv")
    done = subprocess.run([validate, "validate", "--url", server, "--json"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["passed"], report["summary"]
    (metadata,) = [c for c in report["criteria"] if c["id"] == "metadata_endpoint"]
    assert metadata["actual"]["name"] == "chaosops"
    mcp = [c for c in report["criteria"] if "mcp" in c["id"]]  # the tools on /mcp
    assert mcp and all(c["passed"] for c in mcp), mcp


def _finished_ok(metrics_url: str) -> list[float]:
    """The served episodes ``chaosops_episodes_finished_total`` counts as ok, read now."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(metrics_url, timeout=10) as answer:
        text = answer.read().decode()
    return [
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "chaosops_episodes_finished_total"
        and sample.labels.get("policy") == "served" and sample.labels.get("status") == "ok"
    ]  # fmt: skip


def test_served_episodes_are_counted_in_prometheus_metrics(tmp_path: Path) -> None:
    proc, url = _start(tmp_path, "--metrics-port", "0")
    try:
        metrics = proc.stderr.readline().rsplit(" ", 1)[1].strip()
        with GenericEnvClient(base_url=url).sync() as env:
            for seed in (0, 1):
                result = env.reset(failure_type="disk_full", seed=seed, roles=["sre"], max_steps=4)
                while not result.done:
                    result = env.step({"turn": result.observation["turn"], "action_type": "noop"})
        # the client sees the end when the world says it; the runtime counts the
        # episode once it has wound it down, a moment later on a loaded machine
        _until(lambda: _finished_ok(metrics) == [2.0], seconds=30)
        time.sleep(0.3)
        assert _finished_ok(metrics) == [2.0]  # and no episode is counted twice
    finally:
        _stop(proc)


def test_joins_and_comebacks_that_cannot_be_are_refused(server: str) -> None:
    with (
        GenericEnvClient(base_url=server).sync() as a,
        GenericEnvClient(base_url=server).sync() as b,
    ):
        first = a.reset(failure_type="disk_full", seed=1, roles=["sre", "dev"], episode_id="ep-1")
        with pytest.raises(RuntimeError, match="EPISODE_ID_TAKEN"):
            b.reset(episode_id="ep-1")
        with pytest.raises(RuntimeError, match="ROLE_TAKEN: dev played by another client"):
            b.reset(join="ep-1", roles=["dev", "manager"])
        with pytest.raises(RuntimeError, match="SESSION_IN_USE"):
            b.reset(session=first.observation["session"])
        with pytest.raises(RuntimeError, match="NO_EPISODE"):
            b.step({"turn": 0, "action_type": "noop"})  # b holds no seat: nothing refused took one
        assert a.state()["clients"] == ["dev", "sre"] and a.state()["turn"] == 0


@pytest.mark.asyncio
async def test_ctrl_c_stops_a_session_waiting_for_another_clients_move(tmp_path: Path) -> None:
    proc, url = _start(tmp_path)
    async with GenericEnvClient(base_url=url) as a, GenericEnvClient(base_url=url) as b:
        first = await a.reset(failure_type="disk_full", seed=1, roles=["sre"])
        waiting = asyncio.create_task(b.reset(join=first.observation["episode_id"]))
        for _ in range(200):  # the join is seen before the server stops
            if len((await a.state())["clients"]) == 4:
                break
            await asyncio.sleep(0.05)
        await asyncio.to_thread(_stop, proc)  # exit 130, within the stop's bound
        with pytest.raises(RuntimeError, match=r"EPISODE_STOPPED: .* the server is stopping"):
            await waiting
    assert jsonl(tmp_path / "served" / "results.jsonl") == []  # unfinished: not written


def test_a_server_says_what_it_served_when_it_stops(tmp_path: Path) -> None:
    proc, url = _start(tmp_path)
    try:
        with GenericEnvClient(base_url=url).sync() as env:
            result = env.reset(failure_type="db_deadlock", seed=0, roles=["sre"])
            env.step({"turn": result.observation["turn"], "action_type": "restart",
                      "target": "db"})  # fmt: skip
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    last = out.splitlines()[-1]
    assert last.startswith("chaosops serve: served 1 episode(s), 1 resolved; wrote "), out
    assert "summary.json" in last
