"""The records of a run folder: its file names, the JSON line of a value, the
run key of a planned episode, and the ``results.jsonl`` and
``trajectories.jsonl`` records of a finished episode."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import orjson

import actors
from actors import get_logger
from chaosops.env.models import AgentRole, DifficultyTier, FailureType
from chaosops.env.results import EpisodeResult, EpisodeStep
from chaosops.env.world_sim import Scenario

LOG_FILE = "log.jsonl"
"""The run's JSON log, in its folder unless ``--log-json`` says otherwise."""
EVAL_FILE = "eval.json"
"""The table of a ``chaosops eval``, beside its entries' run folders."""
RESULTS_FILE = "results.jsonl"
TRAJECTORIES_FILE = "trajectories.jsonl"
SUMMARY_FILE = "summary.json"
RUN_RECORD = "run.json"
"""The run record: the options of the run in an output folder, written before
its first episode and compared by ``--resume`` (a folder written before it
existed has none). The ``--config`` TOML is the run file."""

_TOKEN_FIELDS = (
    "token_ids",
    "tokens",
    "logprobs",
    "top_logprobs",
    "tool_calls",
    "prompt_token_ids",
    "usage",
    "parse_error",
    "finish_reason",
    "model",
)
"""Turn annotations copied into every trajectory record, null when the policy
did not record them: what the LLM policy records of the server's answer
(``LLMPolicy.__call__`` and ``_token_info`` in ``chaosops.agents.llm.completion``).
Every record has the same keys, whatever the policy and the server returned: a
reader that takes its columns from the first rows (``datasets.Dataset.from_list``,
a JSON reader's first block) then loses none."""

_NO_TOKENS = dict.fromkeys(_TOKEN_FIELDS)
_ANSWER_FIELDS = frozenset(
    ("token_ids", "tokens", "logprobs", "top_logprobs", "tool_calls", "parse_error",
     "finish_reason", "model")
)  # fmt: skip
"""Those of :data:`_TOKEN_FIELDS` that describe the completion: null, like the
completion, for a turn that timed out (its action is the fallback)."""


# --------------------------------------------------------------------------- JSON


def json_default(value: Any) -> Any:
    """What orjson cannot write itself, as JSON: enums, models, sets, paths."""
    if isinstance(value, Enum):
        return value.value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    return repr(value)


_LINE = orjson.OPT_APPEND_NEWLINE
# Keys that are not strings (in what a policy annotated, say) are written as
# their text; orjson's option for them is slower, so it is the second try.
_ANY_KEYS = _LINE | orjson.OPT_NON_STR_KEYS


def dumps_line(obj: Any) -> bytes:
    """``obj`` as one line of compact JSON, newline included. What JSON cannot
    hold (a lone surrogate in a string an LLM answer gave, a container that
    holds itself) is replaced as :func:`actors.json_safe` says, never lost
    with the rest of the line."""
    try:
        return orjson.dumps(obj, default=json_default, option=_LINE)
    except TypeError:
        pass
    try:
        return orjson.dumps(obj, default=json_default, option=_ANY_KEYS)
    except TypeError:
        return orjson.dumps(actors.json_safe(obj), default=json_default, option=_ANY_KEYS)


def _value(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


# --------------------------------------------------------------------- records


class StepLine(TypedDict):
    """One step of a results line (``ResultLine["steps"]``)."""

    turn: int
    role: str
    action: dict[str, Any]
    reward: float
    done: bool
    terminated: bool
    truncated: bool
    timed_out: bool
    error: str | None
    latency_ms: float
    tokens: int | None
    parse_error: str | None
    played_by: NotRequired[str | None]  # lines before the served episodes lack it


class ResultLine(TypedDict):
    """One line of ``results.jsonl``: one finished episode, as
    :func:`result_record` writes it and every reader reads it (the summary,
    evaluation, samples, role figures, the viewer, replay, SFT rows). Readers
    take the fields a line from an older version may lack with ``.get``."""

    run_key: str
    policy: str
    roles: dict[str, dict[str, Any]] | None
    failure_type: str
    difficulty: str
    seed: int
    max_steps: int
    inject_misleading_logs: bool
    rogue_fleet_agent: str | None
    episode_id: str
    status: str
    error: str | None
    resolved: bool
    terminated: bool
    truncated: bool
    final_step: int
    cumulative_reward: float
    wrong_fixes: int
    oversight_flags: list[str]
    declared_root_cause: str | None
    mttr_steps: int
    turn_timeout: dict[str, float | None] | None
    timeouts: int
    errors: int
    wall_s: float
    steps: list[StepLine]


def scenario_fields(scenario: Any) -> dict[str, Any]:
    """The fields of a ``Scenario`` as plain JSON values."""
    rogue = getattr(scenario, "rogue_fleet_agent", None)
    return {
        "failure_type": _value(scenario.failure_type),
        "difficulty": _value(scenario.difficulty),
        "seed": int(scenario.seed),
        "max_steps": int(scenario.max_steps),
        "inject_misleading_logs": bool(getattr(scenario, "inject_misleading_logs", False)),
        "rogue_fleet_agent": None if rogue is None else str(_value(rogue)),
    }


def scenario_from_record(record: Mapping[str, Any]) -> Any:
    """Rebuild the ``Scenario`` recorded in a results line."""

    return Scenario(
        failure_type=FailureType(record["failure_type"]),
        difficulty=DifficultyTier(record["difficulty"]),
        seed=int(record["seed"]),
        max_steps=int(record["max_steps"]),
        inject_misleading_logs=bool(record.get("inject_misleading_logs", False)),
        rogue_fleet_agent=record.get("rogue_fleet_agent"),
    )


def run_key(policy: str, scenario: Any, occurrence: int) -> str:
    """The key that identifies one planned episode across runs and resumes."""
    f = scenario_fields(scenario)
    return (
        f"{policy}/{f['failure_type']}/{f['difficulty']}/seed={f['seed']}"
        f"/max_steps={f['max_steps']}/#{occurrence}"
    )


def parse_run_key(key: str) -> tuple[str, tuple[str, str, int, int], int] | None:
    """``(policy, (failure type, difficulty, seed, max steps), occurrence)`` of a
    run key (see :func:`run_key`), or None for a string that is not one."""
    parts = key.rsplit("/", 5)
    if len(parts) != 6:
        return None
    policy, failure, tier, seed, max_steps, occurrence = parts
    try:
        return (
            policy,
            (
                failure,
                tier,
                int(seed.removeprefix("seed=")),
                int(max_steps.removeprefix("max_steps=")),
            ),
            int(occurrence.removeprefix("#")),
        )
    except ValueError:
        return None


class ListedKeys(Sequence[str]):
    """A plan's run keys in a list, each with its position: what
    :class:`RunOutputs` asks of a plan (the CLI's plans compute theirs)."""

    def __init__(self, keys: Iterable[str]) -> None:
        self._keys = list(keys)
        self._positions = {key: index for index, key in reversed(list(enumerate(self._keys)))}

    def __len__(self) -> int:
        return len(self._keys)

    def __getitem__(self, index: Any) -> Any:
        return self._keys[index]

    def position(self, key: str) -> int | None:
        """The plan index of ``key``, None when the plan holds no such episode."""
        return self._positions.get(key)


def plan_keys(policy: str, scenarios: Sequence[Any]) -> list[str]:
    """Run keys of a plan, numbering repeated scenarios by occurrence."""
    seen: dict[tuple[Any, ...], int] = {}
    keys: list[str] = []
    for scenario in scenarios:
        f = scenario_fields(scenario)
        ident = (f["failure_type"], f["difficulty"], f["seed"], f["max_steps"])
        occurrence = seen.get(ident, 0)
        seen[ident] = occurrence + 1
        keys.append(run_key(policy, scenario, occurrence))
    return keys


def action_json(action: Any) -> dict[str, Any]:
    """An applied action as a JSON-ready dict (role, action_type, target, args)."""
    dump = getattr(action, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return {"repr": repr(action)}


def deadline_fields(turn_timeout: Any) -> dict[str, float | None] | None:
    """The deadline an episode ran under, as ``results.jsonl`` records it:
    seconds per role (every role named, ``None`` for one without a deadline),
    or ``None`` when no role had one.

    ``turn_timeout`` is what the runner took: seconds for every role, a
    mapping role -> seconds (a role left out has no deadline), or ``None``.
    """

    if turn_timeout is None:
        return None
    if not isinstance(turn_timeout, Mapping):
        return {role.value: float(turn_timeout) for role in AgentRole}
    given = {str(_value(role)): seconds for role, seconds in turn_timeout.items()}
    if not any(seconds is not None for seconds in given.values()):
        return None
    return {
        role.value: None if given.get(role.value) is None else float(given[role.value])
        for role in AgentRole
    }


def result_record(
    result: EpisodeResult,
    *,
    policy: str,
    key: str,
    turn_timeout: Any = None,
    roles: Mapping[str, Any] | None = None,
    actions: Sequence[dict[str, Any]] | None = None,
) -> ResultLine:
    """The ``results.jsonl`` record of one finished episode; ``turn_timeout``
    is the deadline it ran under (see :func:`deadline_fields`), ``roles`` what
    played each role (``{"sre": {"policy": ..., "model": ...}, ...}``)."""
    steps: list[StepLine] = []
    for index, step in enumerate(result.steps):
        info: Mapping[str, Any] = step.info or {}
        usage = info.get("usage")
        terminated, truncated = _ending(result, step)
        steps.append(
            {
                "turn": step.turn,
                "role": _value(step.role),
                "action": action_json(step.action) if actions is None else actions[index],
                "reward": float(step.reward),
                "done": bool(step.done),
                "terminated": terminated,
                "truncated": truncated,
                "timed_out": bool(step.timed_out),
                "error": step.error,
                "latency_ms": round(float(step.latency_s) * 1000.0, 3),
                "tokens": usage.get("total_tokens") if isinstance(usage, Mapping) else None,
                "parse_error": None if step.timed_out else info.get("parse_error"),
                "played_by": info.get("played_by"),
            }
        )
    declared = result.declared_root_cause
    scenario = scenario_fields(result.scenario)
    return {
        "run_key": key,
        "policy": policy,
        "roles": dict(roles) if roles else None,
        "failure_type": scenario["failure_type"],
        "difficulty": scenario["difficulty"],
        "seed": scenario["seed"],
        "max_steps": scenario["max_steps"],
        "inject_misleading_logs": scenario["inject_misleading_logs"],
        "rogue_fleet_agent": scenario["rogue_fleet_agent"],
        "episode_id": result.episode_id,
        "status": result.status,
        "error": result.error,
        "resolved": bool(result.resolved),
        "terminated": bool(result.terminated),
        "truncated": bool(result.truncated),
        "final_step": int(result.final_step),
        "cumulative_reward": float(result.cumulative_reward),
        "wrong_fixes": int(result.wrong_fixes),
        "oversight_flags": [str(_value(f)) for f in result.oversight_flags],
        "declared_root_cause": None if declared is None else str(_value(declared)),
        "mttr_steps": int(result.mttr_steps),
        "turn_timeout": deadline_fields(turn_timeout),
        "timeouts": int(result.timeouts),
        "errors": int(result.errors),
        "wall_s": float(result.wall_s),
        "steps": steps,
    }


def _ending(result: EpisodeResult, step: EpisodeStep) -> tuple[bool, bool]:
    """How a step ended its episode, in the RL sense (terminated, truncated):
    its last step is terminated (resolved) or truncated (cut at the step
    limit); others neither."""
    last = bool(step.done)
    return last and result.terminated, last and result.truncated


Renderer = Callable[[Any, Any], Any]


def trajectory_records(
    result: EpisodeResult, *, policy: str, key: str, render: Renderer | None = None
) -> list[dict[str, Any]]:
    """The ``trajectories.jsonl`` records of one episode, one per applied step.

    ``prompt`` and ``completion`` come from what the policy annotated on the
    turn (an LLM policy records the exact messages it sent and the raw text it
    got). For other policies the prompt is ``render(observation, role)`` (the
    LLM package's renderer, so scripted runs give training-ready prompts) and
    the completion is the action's JSON in the prompt's answer format
    (action_type, target, args). A turn that timed out or failed
    without a recorded completion has ``completion`` null (its action is the
    fallback, not something the policy produced), and so has one whose policy
    recorded a null completion (a server that sent no text).

    Every record has the same keys (a column store needs them): the token
    fields (:data:`_TOKEN_FIELDS`) are null when not recorded, and ``prompt`` is
    null, not a text, when ``render`` fails.
    """
    records = []
    unrendered: list[Any] = []  # the turns whose prompt failed to render
    first_error: BaseException | None = None  # the first of those failures
    for index, step in enumerate(result.steps):
        info: Mapping[str, Any] = step.info or {}
        prompt = info.get("prompt")
        if prompt is None and render is not None:
            try:
                prompt = render(step.observation, step.role)
            except Exception as exc:  # a renderer bug must not lose the episode
                unrendered.append(step.turn)
                first_error = first_error or exc
        record = {
            "episode_id": result.episode_id,
            "run_key": key,
            "policy": policy,
            "turn": step.turn,
            "step": index + 1,
            **_step_fields(result, step, info, prompt),
        }
        records.append(record)
    if first_error is not None:
        # One warning per episode, however many of its prompts failed: which
        # turns have a null prompt, and the first failure's traceback.
        get_logger().warning(
            "prompt_render_failed",
            episode_id=result.episode_id,
            turns=unrendered,
            exc_info=(type(first_error), first_error, first_error.__traceback__),
        )
    return records


def _step_fields(
    result: EpisodeResult, step: EpisodeStep, info: Mapping[str, Any], prompt: Any
) -> dict[str, Any]:
    """A trajectory record's fields from ``role`` on: what the turn saw and did."""
    action = action_json(step.action)
    breakdown = step.breakdown
    terminated, truncated = _ending(result, step)
    return {
        "role": _value(step.role),
        "prompt": prompt,
        "completion": _completion(step, info, action),
        "action": action,
        "reward": float(step.reward),
        "team_reward": None if breakdown is None else float(breakdown.team_reward),
        "oversight_reward": None if breakdown is None else float(breakdown.oversight_reward),
        "done": bool(step.done),
        "terminated": terminated,
        "truncated": truncated,
        "timed_out": bool(step.timed_out),
        "error": step.error,
        "played_by": info.get("played_by"),
        **_token_fields(info, step.timed_out),
    }


def _completion(step: EpisodeStep, info: Mapping[str, Any], action: dict[str, Any]) -> str | None:
    """What the policy answered: what it recorded (an LLM's raw text, None
    when a failed turn recorded nothing), or a scripted policy's action in the
    prompt's answer format; None for a turn closed at its deadline (the
    fallback was applied, not a late answer)."""
    if step.timed_out:
        return None
    if "completion" in info or step.error:
        return info.get("completion")
    answer = {
        "action_type": action["action_type"],
        "target": action["target"],
        "args": action["args"],
    }
    return dumps_line(answer)[:-1].decode()


def _token_fields(info: Mapping[str, Any], timed_out: bool) -> Mapping[str, Any]:
    """The token fields of a turn's record (a closed turn's answer fields null)."""
    if not info:  # a scripted policy's turn
        return _NO_TOKENS
    return {
        name: None if timed_out and name in _ANSWER_FIELDS else info.get(name)
        for name in _TOKEN_FIELDS
    }


def episode_lines(
    result: EpisodeResult,
    *,
    policy: str,
    key: str,
    render: Renderer | None = None,
    turn_timeout: Any = None,
    roles: Mapping[str, Any] | None = None,
) -> tuple[bytes, bytes, ResultLine]:
    """An episode's ``trajectories.jsonl`` lines and ``results.jsonl`` line, as
    :meth:`RunOutputs.write_lines` appends them, and its results record."""
    records = trajectory_records(result, policy=policy, key=key, render=render)
    actions = [r["action"] for r in records]  # each action's JSON made once, for both files
    record = result_record(result, policy=policy, key=key, turn_timeout=turn_timeout,
                           roles=roles, actions=actions)  # fmt: skip
    return b"".join(map(dumps_line, records)), dumps_line(record), record
