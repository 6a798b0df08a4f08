"""Supervised rows from run folders, in the format GRPO's rollouts have.

A run's episodes (``results.jsonl``: each step's role and move) are replayed
through :class:`~chaosops.train.trl.ChaosOpsToolEnv`, the trained role's
recorded moves as tool calls and the other roles' as they were played. The
world is deterministic, so the replay is the episode, and every message is
what a GRPO rollout of that row would hold: the tool system prompt, the
reset text appended to the row's user message, assistant turns with
``tool_calls``, and the tools' answers.

Each of the role's turns is one prompt-completion row: the conversation up to
the turn as ``prompt``, the assistant's call as ``completion``, so that the
loss falls on the calls alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from chaosops._extras import require
from chaosops.agents.conversation import tool_call, tool_schemas
from chaosops.env.models import AgentRole, ChaosOpsAction
from chaosops.outputs.files import ResultsReader
from chaosops.outputs.records import ResultLine, scenario_from_record

from .data import row_of
from .trl import ChaosOpsToolEnv

__all__ = ["call_tool", "sft_dataset", "sft_rows", "tool_call", "tool_schemas"]


def call_tool(env: ChaosOpsToolEnv, call: Mapping[str, Any]) -> str:
    """Make the call ``call`` (as :func:`tool_call` writes it) on ``env``."""
    function = call["function"]
    return getattr(env, function["name"])(**function["arguments"])


def sft_rows(
    run_folders: Iterable[str | Path] | str | Path,
    role: str | None = None,
    resolved_only: bool = True,
) -> list[dict[str, Any]]:
    """One row per turn of ``role`` (None: every role) in the episodes of
    ``run_folders``: ``prompt``, ``completion``, ``episode_id``, ``role``,
    ``turn``. ``resolved_only`` keeps the episodes that resolved. An episode
    in which the role's turn fell to the fallback (a timeout, an unparsed
    answer) is left out: that turn was no move of the role's."""
    folders = [run_folders] if isinstance(run_folders, str | Path) else list(run_folders)
    roles = list(AgentRole) if role is None else [AgentRole(role)]
    return [
        row
        for folder in folders
        for record in ResultsReader(folder)
        if record.get("status") == "ok" and (record.get("resolved") or not resolved_only)
        for trained in roles
        for row in _episode_rows(record, trained)
    ]


def sft_dataset(
    run_folders: Iterable[str | Path] | str | Path,
    role: str | None = None,
    resolved_only: bool = True,
) -> Any:
    """:func:`sft_rows` as a ``datasets.Dataset``, with the ``tools`` column
    (JSON) that TRL's SFTTrainer renders the calls with (the ``train`` extra)."""
    datasets = require("datasets", "train", "chaosops.train.sft_dataset")
    tools = json.dumps(tool_schemas())
    rows = [{**row, "tools": tools} for row in sft_rows(run_folders, role, resolved_only)]
    if not rows:
        raise ValueError(_no_rows(run_folders, role, resolved_only))
    return datasets.Dataset.from_list(rows, features=_features(datasets))


def _no_rows(run_folders: Any, role: str | None, resolved_only: bool) -> str:
    """Why the folders give no row: how many episodes, and why each is left out."""
    folders = [run_folders] if isinstance(run_folders, str | Path) else list(run_folders)
    records = [r for folder in folders for r in ResultsReader(folder)]
    roles = {role} if role is not None else {r.value for r in AgentRole}
    kept = [
        r for r in records if r.get("status") == "ok" and (r.get("resolved") or not resolved_only)
    ]
    fallbacks = sum(1 for r in kept for s in r["steps"] if s["role"] in roles
                    and (s.get("timed_out") or s.get("parse_error") or s.get("error")))  # fmt: skip
    who = f"the {role}" if role is not None else "any role"
    return (
        f"no supervised row in {', '.join(map(str, folders))}: of {len(records)} episode(s), "
        f"{len(kept)} {'resolved' if resolved_only else 'finished'}, and in those {who} had "
        f"{fallbacks} turn(s) played by the fallback (a timeout, an unread answer, an error); "
        "an episode is kept only when every turn of the role was a move of its own"
        + ("; resolved_only=False keeps unresolved episodes" if resolved_only else "")
    )


def _features(datasets: Any) -> Any:
    """The columns' types. A call's ``arguments`` is JSON: Arrow would otherwise
    give every call every tool's arguments, the others as nulls."""
    text = datasets.Value("string")
    call = {"type": text, "function": {"name": text, "arguments": datasets.Json()}}
    message = {"role": text, "content": text, "name": text, "tool_calls": datasets.List(call)}
    return datasets.Features({
        "prompt": datasets.List(message), "completion": datasets.List(message),
        "episode_id": text, "role": text, "turn": datasets.Value("int64"), "tools": text,
    })  # fmt: skip


def _episode_rows(record: ResultLine, trained: AgentRole) -> Iterator[dict[str, Any]]:
    steps = record["steps"]
    own = [s for s in steps if s["role"] == trained.value]
    if not own or any(s.get("timed_out") or s.get("parse_error") or s.get("error") for s in own):
        return
    replayed = {r: iter([s["action"] for s in steps if s["role"] == r.value]) for r in AgentRole}
    others = {r.value: _replay(replayed[r]) for r in AgentRole if r is not trained}
    with ChaosOpsToolEnv(others=others) as env:
        row = row_of(scenario_from_record(record), trained)
        system, user = row["prompt"]
        user = {**user, "content": user["content"] + env.reset(**row)}
        conversation = [system, user]
        for turn, action in enumerate(replayed[trained]):
            call = tool_call(ChaosOpsAction.model_validate(action))
            answer = {"role": "assistant", "content": "", "tool_calls": [call]}
            yield {
                "prompt": list(conversation), "completion": [answer],
                "episode_id": record["episode_id"], "role": trained.value, "turn": turn,
            }  # fmt: skip
            name, text = call["function"]["name"], call_tool(env, call)
            conversation += [answer, {"role": "tool", "name": name, "content": text}]


def _replay(actions: Iterator[dict[str, Any]]) -> Any:
    def policy(obs: Any, role: AgentRole) -> ChaosOpsAction:
        return ChaosOpsAction.model_validate(next(actions))

    return policy
