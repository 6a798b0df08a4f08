"""The moves as MCP tools on ``/mcp`` (OpenEnv 0.10), through OpenEnv's own
``MCPToolClient`` against ``chaosops serve`` on loopback."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaosops.agents.conversation import MoveTools, tool_call
from chaosops.env.models import ActionType, FailureType
from tests._needs import needs

from ..cli._cli import spawn, stop
from ._local import oracle_episode

try:
    from openenv.core.mcp_client import MCPToolClient
except ImportError:  # pragma: no cover - the test extra installs openenv
    MCPToolClient = None


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    needs(MCPToolClient, "openenv", "pip install -e '.[test]' (or the 'serve' extra)")
    work = tmp_path_factory.mktemp("mcp")
    proc = spawn("serve", "--port", "0", "--out", work / "served", cwd=work)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("chaosops serve: OpenEnv environment at "), line
        yield line.split(" at ", 1)[1].split(" ,", 1)[0]
    finally:
        stop(proc)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_the_tools_are_the_moves_with_the_trainers_docstrings(server: str) -> None:
    with MCPToolClient(base_url=server).sync() as env:
        tools = {tool.name: tool for tool in env.list_tools()}
    assert set(tools) == {kind.value for kind in ActionType} | {"open_episode", "observe"}
    restart = tools["restart"]
    assert restart.description.startswith(MoveTools.restart.__doc__.split("\n")[0])
    assert restart.input_schema["required"] == ["service"]
    assert set(tools["scale"].input_schema["properties"]) == {"service", "replicas"}


@pytest.mark.parametrize("failure", [FailureType.DB_DEADLOCK, FailureType.ROGUE_DEPLOY_BOT])
def test_an_episode_played_by_tool_calls_equals_it_played_locally(server: str, failure) -> None:
    turns, local = oracle_episode(failure)
    with MCPToolClient(base_url=server).sync() as env:
        served = env.call_tool(
            "open_episode", failure_type=failure.value, difficulty="hard", seed=4
        )
        for turn in turns:
            assert (served["role"], served["turn"]) == (turn.seen.turn_role.value, turn.seen.step)
            call = tool_call(turn.move)["function"]
            served = env.call_tool(call["name"], **call["arguments"])
            assert served["reward"] == pytest.approx(turn.reward)
        assert served["done"] and served["terminated"] == local.state.resolved


def test_a_refused_call_names_its_code_and_each_session_has_its_own_seat(server: str) -> None:
    with MCPToolClient(base_url=server).sync() as one, MCPToolClient(base_url=server).sync() as two:
        with pytest.raises(RuntimeError, match="NO_EPISODE"):
            one.call_tool("noop")
        first = one.call_tool("open_episode", failure_type="db_deadlock", seed=0, roles=["sre"])
        other = two.call_tool("open_episode", failure_type="disk_full", seed=1, roles=["sre"])
        assert first["episode_id"] != other["episode_id"]
        with pytest.raises(RuntimeError, match="ILLEGAL_MOVE: flag_rogue is the oversight's"):
            one.call_tool("flag_rogue", agent_name="deploy_bot")
        assert one.call_tool("observe")["turn"] == 0  # the refused move was not applied
        after = two.call_tool("noop")
        assert after["turn"] > other["turn"] and one.call_tool("observe")["turn"] == 0
        with pytest.raises(RuntimeError, match="BAD_SCENARIO"):
            one.call_tool("open_episode", failure_type="no_such_failure")


def test_the_manifest_declares_what_the_server_serves(server: str) -> None:
    from openenv.validation.parsers.openenv_yaml import OpenEnvYamlParser

    manifest = OpenEnvYamlParser().parse(Path(__file__).parents[3])
    assert manifest.name == "chaosops" and manifest.capabilities.task_api
    with MCPToolClient(base_url=server).sync() as env:
        served = sorted(tool.name for tool in env.list_tools())
    assert sorted(manifest.capabilities.declared_tools) == served
    for split, count in manifest.capabilities.declared_task_count.items():
        request = urllib.request.Request(
            f"{server}/chaosops/num_tasks", data=json.dumps({"split": split}).encode(),
            headers={"content-type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert json.load(answer)["num_tasks"] == count, split
