"""Tolerant parsing of model answers: every accepted form and broken ones."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from chaosops.agents.llm import ACTION_TOOL, parse_action
from chaosops.agents.llm.parse import MAX_PARSE_CHARS
from chaosops.env.models import ActionType

RESTART_DB = {"action_type": "restart", "target": "db", "args": {}}

ACCEPTED: list[tuple[str, str, tuple[str, str | None, dict[str, Any]]]] = [
    ("alone", json.dumps(RESTART_DB), ("restart", "db", {})),
    ("alone with spaces", f"\n  {json.dumps(RESTART_DB)}  \n", ("restart", "db", {})),
    (
        "json fence",
        'Plan:\n```json\n{"action_type": "rollback", "target": "auth"}\n```\nDone.',
        ("rollback", "auth", {}),
    ),
    (
        "bare fence",
        '```\n{"action_type": "noop"}\n```',
        ("noop", None, {}),
    ),
    (
        "inside chatter",
        'I think {"action_type": "scale", "target": "payments", "args": {"replicas": 4}} fixes it',
        ("scale", "payments", {"replicas": 4}),
    ),
    (
        "chatter with braces before",
        'Metrics {cpu high}. Action: {"action_type": "restart", "target": "notifications"}',
        ("restart", "notifications", {}),
    ),
    (
        "nested args",
        '{"action_type": "communicate", "target": null,'
        ' "args": {"message": "db is down", "to": "all", "meta": {"urgent": true}}}',
        ("communicate", None, {"message": "db is down", "to": "all", "meta": {"urgent": True}}),
    ),
    (
        "args as a JSON string",
        '{"action_type": "identify_root_cause", "args": "{\\"failure_type\\": \\"db_deadlock\\"}"}',
        ("identify_root_cause", None, {"failure_type": "db_deadlock"}),
    ),
    (
        "flat args",
        '{"action_type": "scale", "target": "db", "replicas": 2, "reasoning": "disk"}',
        ("scale", "db", {"replicas": 2}),
    ),
    (
        "wrapped in action",
        '{"action": {"action_type": "flag_rogue", "target": "autoscaler"}}',
        ("flag_rogue", "autoscaler", {}),
    ),
    (
        "wrapped one level",
        '{"thought": "x", "response": {"action_type": "escalate"}}',
        ("escalate", None, {}),
    ),
    (
        "type spelled loosely",
        '{"action_type": "Flag-Rogue", "target": "deploy_bot"}',
        ("flag_rogue", "deploy_bot", {}),
    ),
    ("action key", '{"action": "resolve"}', ("resolve", None, {})),
    ("null target string", '{"action_type": "escalate", "target": "null"}', ("escalate", None, {})),
    ("object inside an array", '[{"action_type": "restart"}]', ("restart", None, {})),
    (
        "none args dropped",
        '{"action_type": "communicate", "args": {"message": "hi", "to": null}}',
        ("communicate", None, {"message": "hi"}),
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"), [(t, e) for _, t, e in ACCEPTED], ids=[name for name, _, _ in ACCEPTED]
)
def test_accepted_text_forms(text: str, expected: tuple[str, str | None, dict[str, Any]]) -> None:
    action, error = parse_action(text, "sre")
    assert error is None
    assert action is not None
    assert (action.action_type.value, action.target, action.args) == expected
    assert action.role.value == "sre"


def _call(name: str, arguments: Any) -> dict[str, Any]:
    return {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}


TOOL_CALLS: list[tuple[str, list[Any], tuple[str, str | None]]] = [
    ("take_action", [_call("take_action", json.dumps(RESTART_DB))], ("restart", "db")),
    ("named after the action", [_call("rollback", '{"target": "auth"}')], ("rollback", "auth")),
    (
        "arguments as a dict",
        [_call("take_action", {"action_type": "escalate"})],
        ("escalate", None),
    ),
    (
        "attribute objects (openai types)",
        [
            SimpleNamespace(
                function=SimpleNamespace(name="take_action", arguments='{"action_type": "noop"}')
            )
        ],
        ("noop", None),
    ),
    (
        "arguments encoded twice",
        [_call("take_action", json.dumps(json.dumps(RESTART_DB)))],
        ("restart", "db"),
    ),
    (
        "first broken, second good",
        [_call("take_action", "{oops"), _call("take_action", '{"action_type": "resolve"}')],
        ("resolve", None),
    ),
]


@pytest.mark.parametrize(
    ("calls", "expected"),
    [(c, e) for _, c, e in TOOL_CALLS],
    ids=[name for name, _, _ in TOOL_CALLS],
)
def test_tool_calls(calls: list[Any], expected: tuple[str, str | None]) -> None:
    action, error = parse_action(None, "dev", calls)
    assert error is None and action is not None
    assert (action.action_type.value, action.target) == expected


BROKEN: list[tuple[str, str | None, str]] = [
    ("empty", "", "empty"),
    ("none", None, "empty"),
    ("prose", "I would restart the database.", "no JSON action"),
    ("unquoted keys", "{action_type: restart, target: db}", "no JSON action"),
    ("truncated", '{"action_type": "restart", "target": "d', "no JSON action"),
    ("unknown type", '{"action_type": "reboot_everything"}', "unknown action_type"),
    ("type not a string", '{"action_type": 3}', "not a string"),
    ("args not an object", '{"action_type": "scale", "args": [1, 2]}', "args"),
    ("args string not JSON", '{"action_type": "scale", "args": "replicas=4"}', "args"),
    ("target an object", '{"action_type": "restart", "target": {"name": "db"}}', "target"),
    ("json array of no objects", '["restart", "db"]', "no JSON action"),
    ("no action_type", '{"target": "db"}', "no JSON action"),
    ("python literal is not evaluated", "__import__('os').system('true')", "no JSON action"),
    # decoded by JSON, but not recordable as applied (the outputs' encoder)
    ("NaN argument", '{"action_type": "scale", "args": {"replicas": NaN}}', "nan"),
    ("infinite flat argument", '{"action_type": "scale", "replicas": -Infinity}', "-inf"),
    ("integer past 64 bits", '{"action_type": "scale", "args": {"replicas": 1' + "0" * 25 + "}}",
     "beyond 64 bits"),
    ("args nested 300 deep", '{"action_type": "communicate", "args": {"x": ' + "[" * 300
     + "]" * 300 + "}}", "deeper than"),
    ("deep in a tool call's text", '{"action_type": "noop", "args": {"a": ' + '{"a": ' * 20
     + "1" + "}" * 20 + "}}", "deeper than"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "needle"), [(t, n) for _, t, n in BROKEN], ids=[name for name, _, _ in BROKEN]
)
def test_broken_answers(text: str | None, needle: str) -> None:
    action, error = parse_action(text, "sre")
    assert action is None
    assert error is not None and needle in error
    assert "\n" not in error


def test_broken_tool_call_reports_error() -> None:
    action, error = parse_action(None, "sre", [_call("take_action", "{not json")])
    assert action is None and error is not None and "tool call" in error


def test_huge_answer_is_bounded() -> None:
    text = "{" * (MAX_PARSE_CHARS * 5) + '{"action_type": "noop"}'
    action, error = parse_action(text, "sre")
    assert action is None and error  # the action lies beyond the parsed prefix


def test_tool_schema_lists_every_action_type() -> None:
    schema = ACTION_TOOL["function"]["parameters"]
    assert ACTION_TOOL["function"]["name"] == "take_action"
    assert set(schema["properties"]["action_type"]["enum"]) == {a.value for a in ActionType}


def test_recordable_arguments_are_kept() -> None:
    """At the bounds: a 64-bit integer, floats, a few levels of nesting."""
    args = {"replicas": 2**64 - 1, "low": -(2**63), "ratio": 0.5, "deep": [[[{"a": [1]}]]]}
    action, error = parse_action(json.dumps({"action_type": "scale", "args": args}), "sre")
    assert error is None and action is not None and action.args == args
