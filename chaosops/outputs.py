"""Crash-safe output files of ``chaosops run``.

An output folder holds:

- ``results.jsonl``: one JSON object per line, one line per finished episode
  (:func:`result_record`), including every applied action, so that
  ``chaosops replay`` needs nothing else;
- ``trajectories.jsonl``: one JSON object per applied step
  (:func:`trajectory_records`): the rendered prompt, the raw completion, the
  action, the rewards, and token ids / logprobs when the policy recorded them;
- ``summary.json``: the evaluation table of the whole folder, written at the end.

Crash safety:

- each episode's trajectory lines go out in one ``write()`` *before* its
  results line, and the results line goes out in one ``write()`` of a complete
  line on an unbuffered file, so a process killed at any moment leaves whole
  lines only (at worst one torn last line), and a results line implies that
  its trajectory is complete;
- ``summary.json`` and a rewritten ``trajectories.jsonl`` are written to a
  temporary file in the same folder and moved into place with ``os.replace``;
- one run at a time per folder: :meth:`RunOutputs.open` takes an exclusive
  lock (``flock``) on ``results.jsonl``, held until :meth:`RunOutputs.close`
  or the process's end (a killed run holds nothing), and refuses a folder
  whose lock another process holds (two writers would duplicate episodes
  and split the trajectories between two files);
- :meth:`RunOutputs.open` with ``resume=True`` truncates a torn last line of
  ``results.jsonl``, keeps the first line of a run key recorded twice, drops
  an episode whose trajectory lost a line (its results line too: it runs
  again), drops trajectory lines of episodes that have no results line, and
  reports the plan indices already done so that they are skipped (a bytearray
  over the plan: resuming holds a few bytes per planned episode).

A *run key* identifies one planned episode: policy, failure type, difficulty,
seed, max steps and the occurrence index of that scenario in the plan (so a
suite that lists the same scenario twice runs it twice, also across a resume).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import orjson

import actors

__all__ = [
    "EVAL_FILE",
    "LOG_FILE",
    "RESULTS_FILE",
    "SUMMARY_FILE",
    "TRAJECTORIES_FILE",
    "ListedKeys",
    "OutputError",
    "ResumeState",
    "RunOutputs",
    "action_json",
    "atomic_write_bytes",
    "deadline_fields",
    "dumps_line",
    "episode_lines",
    "iter_lines",
    "parse_run_key",
    "plan_keys",
    "read_object",
    "read_results",
    "result_record",
    "results_file",
    "run_key",
    "scenario_fields",
    "scenario_from_record",
    "trajectory_records",
]

LOG_FILE = "log.jsonl"
"""The run's JSON log, in its folder unless ``--log-json`` says otherwise."""
EVAL_FILE = "eval.json"
"""The table of a ``chaosops eval``, beside its entries' run folders."""
RESULTS_FILE = "results.jsonl"
TRAJECTORIES_FILE = "trajectories.jsonl"
SUMMARY_FILE = "summary.json"
RUN_FILE = "run.json"
"""The options of the run in an output folder, written before its first episode
and compared by ``--resume`` (a folder written before it existed has none)."""

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
(``LLMPolicy.__call__`` and ``_token_info`` in ``chaosops.agents.llm.policy``).
Every record has the same keys, whatever the policy and the server returned: a
reader that takes its columns from the first rows (``datasets.Dataset.from_list``,
a JSON reader's first block) then loses none."""

_ANSWER_FIELDS = frozenset(
    ("token_ids", "tokens", "logprobs", "top_logprobs", "tool_calls", "parse_error",
     "finish_reason", "model")
)  # fmt: skip
"""Those of :data:`_TOKEN_FIELDS` that describe the completion: null, like the
completion, for a turn that timed out (its action is the fallback)."""


class OutputError(Exception):
    """An output folder or file cannot be used; the message is one line.

    ``usage`` is true when the cause is the user's input (a folder that already
    holds a run, a damaged results file) rather than the system.
    """

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


# --------------------------------------------------------------------------- JSON


def _default(value: Any) -> Any:
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


_LINE = orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS


def dumps_line(obj: Any) -> bytes:
    """``obj`` as one line of compact JSON, newline included. What JSON cannot
    hold (a lone surrogate in a string an LLM answer gave, a container that
    holds itself) is replaced as :func:`actors.json_safe` says, never lost
    with the rest of the line."""
    try:
        return orjson.dumps(obj, default=_default, option=_LINE)
    except TypeError:
        return orjson.dumps(actors.json_safe(obj), default=_default, option=_LINE)


def _value(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


# --------------------------------------------------------------------- records


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
    from chaosops.env.models import DifficultyTier, FailureType
    from chaosops.env.world_sim import Scenario

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
    from chaosops.env.models import AgentRole

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
    result: Any,
    *,
    policy: str,
    key: str,
    turn_timeout: Any = None,
    roles: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``results.jsonl`` record of one finished episode; ``turn_timeout``
    is the deadline it ran under (see :func:`deadline_fields`), ``roles`` what
    played each role (``{"sre": {"policy": ..., "model": ...}, ...}``)."""
    steps = []
    for step in result.steps:
        info: Mapping[str, Any] = getattr(step, "info", None) or {}
        usage = info.get("usage")
        steps.append(
            {
                "turn": step.turn,
                "role": _value(step.role),
                "action": action_json(step.action),
                "reward": float(step.reward),
                "done": bool(step.done),
                "timed_out": bool(step.timed_out),
                "error": step.error,
                "latency_ms": round(float(getattr(step, "latency_s", 0.0)) * 1000.0, 3),
                "tokens": usage.get("total_tokens") if isinstance(usage, Mapping) else None,
                "parse_error": None if step.timed_out else info.get("parse_error"),
            }
        )
    declared = result.declared_root_cause
    return {
        "run_key": key,
        "policy": policy,
        "roles": dict(roles) if roles else None,
        **scenario_fields(result.scenario),
        "episode_id": result.episode_id,
        "status": result.status,
        "error": result.error,
        "resolved": bool(result.resolved),
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


Renderer = Callable[[Any, Any], Any]


def trajectory_records(
    result: Any, *, policy: str, key: str, render: Renderer | None = None
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
        info: Mapping[str, Any] = getattr(step, "info", None) or {}
        action = action_json(step.action)
        prompt = info.get("prompt")
        if prompt is None and render is not None:
            try:
                prompt = render(step.observation, step.role)
            except Exception as exc:  # a renderer bug must not lose the episode; null,
                prompt = None  # not a text where every other record has a list of messages
                unrendered.append(step.turn)
                first_error = first_error or exc
        # A turn closed at its deadline applied the fallback: a completion that
        # came in after it (annotated before the turn was seen closed) is not
        # what was applied, and neither are its tokens.
        completion = None if step.timed_out else info.get("completion")
        if "completion" not in info and not (step.timed_out or step.error):
            # A scripted policy's answer, written in the format the prompt asks for.
            completion = dumps_line(
                {
                    "action_type": action["action_type"],
                    "target": action["target"],
                    "args": action["args"],
                }
            )[:-1].decode()
        breakdown = step.breakdown
        record: dict[str, Any] = {
            "episode_id": result.episode_id,
            "run_key": key,
            "policy": policy,
            "turn": step.turn,
            "step": index + 1,
            "role": _value(step.role),
            "prompt": prompt,
            "completion": completion,
            "action": action,
            "reward": float(step.reward),
            "team_reward": None if breakdown is None else float(breakdown.team_reward),
            "oversight_reward": (None if breakdown is None else float(breakdown.oversight_reward)),
            "done": bool(step.done),
            "timed_out": bool(step.timed_out),
            "error": step.error,
        }
        for name in _TOKEN_FIELDS:
            answer_of_closed_turn = step.timed_out and name in _ANSWER_FIELDS
            record[name] = None if answer_of_closed_turn else info.get(name)
        records.append(record)
    if first_error is not None:
        # One warning per episode, however many of its prompts failed: which
        # turns have a null prompt, and the first failure's traceback.
        from actors import get_logger

        get_logger().warning(
            "prompt_render_failed",
            episode_id=result.episode_id,
            turns=unrendered,
            exc_info=(type(first_error), first_error, first_error.__traceback__),
        )
    return records


def episode_lines(
    result: Any,
    *,
    policy: str,
    key: str,
    render: Renderer | None = None,
    turn_timeout: Any = None,
    roles: Mapping[str, Any] | None = None,
) -> tuple[bytes, bytes, dict[str, Any]]:
    """An episode's ``trajectories.jsonl`` lines and ``results.jsonl`` line, as
    :meth:`RunOutputs.write_lines` appends them, and its results record."""
    records = trajectory_records(result, policy=policy, key=key, render=render)
    record = result_record(result, policy=policy, key=key, turn_timeout=turn_timeout, roles=roles)
    return b"".join(map(dumps_line, records)), dumps_line(record), record


# ----------------------------------------------------------------------- files


def atomic_write_lines(path: Path, lines: Iterable[bytes]) -> None:
    """Write ``lines`` (each ending in a newline) to ``path`` via a temporary file
    and ``os.replace``, as they come: a rewrite of a large file holds one line
    at a time.

    The temporary file sits in the same folder (so the rename is atomic) and is
    created with the usual permissions (umask applies).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as handle:
            for line in lines:
                handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_write_lines`)."""
    atomic_write_lines(path, (data,))


def _trajectory_record(line: bytes) -> dict[str, Any] | None:
    """A whole trajectory line's record (with episode_id and step), else None."""
    if not line.endswith(b"\n"):
        return None  # torn
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(record, dict) or "episode_id" not in record or "step" not in record:
        return None
    return record


def _line_identity(line: bytes, keys: Any) -> tuple[int | None, Any, Any]:
    """(plan index, episode id, step) of a trajectory line; index None for a
    line that does not read or names no planned episode."""
    record = _trajectory_record(line)
    if record is None or not isinstance(record.get("run_key"), str):
        return None, None, None
    return keys.position(record["run_key"]), record["episode_id"], record["step"]


def _owner_tag(episode: Any) -> int:
    """A 32-bit hash of an episode id, plus one (0 stands for no episode yet)."""
    return zlib.crc32(str(episode).encode()) + 1


class _Tally:
    """Per planned episode, the trajectory lines read in step order (1, 2, ...)
    and whose they are (:func:`_owner_tag`; -1 when two episodes wrote lines
    under one run key): arrays of a few bytes per planned episode."""

    def __init__(self, keys: Any, path: Path | None = None) -> None:
        self.lines = array("I", bytes(4 * len(keys)))
        self.owner = array("q", bytes(8 * len(keys)))
        self.lines_read = 0
        if path is not None and path.exists():
            with open(path, "rb") as handle:
                for line in handle:
                    self.lines_read += 1
                    index, episode, step = _line_identity(line, keys)
                    if index is not None:
                        self.add(index, episode, step)

    def add(self, index: int, episode: Any, step: Any) -> bool:
        """Count a line of ``episode``'s when it is the next step of its owner's."""
        tag = _owner_tag(episode)
        if self.owner[index] == 0:
            self.owner[index] = tag
        elif self.owner[index] != tag:
            self.owner[index] = -1
            return False
        if step != self.lines[index] + 1:
            return False
        self.lines[index] += 1
        return True

    def owns(self, index: int, episode: Any) -> bool:
        return self.owner[index] == _owner_tag(episode)

    def complete(self, index: int, episode: Any, steps: int) -> bool:
        """Whether ``episode`` alone wrote lines under ``index``: ``steps`` of them."""
        if steps == 0:  # an episode that failed before its first step wrote none
            return self.owner[index] == 0
        return self.owns(index, episode) and self.lines[index] >= steps

    def lines_of(self, done: bytearray) -> int:
        """The lines counted for the plan indices in ``done``."""
        return sum(n for n, kept in zip(self.lines, done, strict=True) if kept)


def read_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path`` (run.json, summary.json), None when it cannot
    be read or is not one."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def results_file(path: str | Path) -> Path:
    """``path`` itself, or the ``results.jsonl`` in it when it is a run folder."""
    file = Path(path)
    return file / RESULTS_FILE if file.is_dir() else file


class ResultsReader:
    """The records of a ``results.jsonl`` (or the one in a run folder), read a
    line at a time as they are iterated: memory does not grow with the file.

    After the iteration, ``torn`` says whether a torn last line (a run killed
    while writing it) was skipped. A damaged line elsewhere raises
    :class:`OutputError` naming the file and line.
    """

    def __init__(self, path: str | Path) -> None:
        self.file = results_file(path)
        self.torn = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            handle = open(self.file, "rb")
        except FileNotFoundError:
            raise OutputError(f"no results file at {self.file}", usage=True) from None
        except OSError as exc:
            raise OutputError(f"cannot read {self.file}: {exc.strerror or exc}") from None
        with handle:
            for number, line in enumerate(handle, start=1):
                if not line.endswith(b"\n"):
                    self.torn = bool(line.strip())
                    return
                if line.strip():
                    yield self._record(line, number)

    def _record(self, line: bytes, number: int) -> dict[str, Any]:
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise OutputError(
                f"{self.file}: line {number} is not valid JSON; expected one results record "
                "per line",
                usage=True,
            ) from None
        if not isinstance(record, dict) or "run_key" not in record or "steps" not in record:
            raise OutputError(
                f"{self.file}: line {number} is not a chaosops results record "
                "(expected an object with run_key and steps)",
                usage=True,
            )
        return record


def read_results(path: str | Path) -> tuple[list[dict[str, Any]], bool]:
    """Every record of a ``results.jsonl`` in a list, and whether a torn last
    line was skipped (see :class:`ResultsReader`, which streams them)."""
    reader = ResultsReader(path)
    records = list(reader)
    return records, reader.torn


@dataclass
class ResumeState:
    """What :meth:`RunOutputs.open` found in the folder."""

    done: bytearray = field(default_factory=bytearray)  # 1 at each plan index recorded
    records: int = 0
    torn_results_line: bool = False
    dropped_trajectory_lines: int = 0
    duplicate_results: int = 0  # later lines of a run key already recorded, dropped
    damaged_episodes: int = 0  # finished episodes with a trajectory line lost, to run again


class RunOutputs:
    """The writers of one output folder (see the module docstring).

    Use as a context manager, or call :meth:`open` and :meth:`close`.
    """

    def __init__(
        self,
        out_dir: str | Path,
        *,
        keys: Sequence[str] = (),
        resume: bool = False,
        fsync: bool = False,
    ) -> None:
        # the plan's run keys (with ``position(key)``, as ListedKeys); a plain
        # sequence is listed
        self.keys: Any = keys if hasattr(keys, "position") else ListedKeys(keys)
        self.out_dir = Path(out_dir)
        self.resume = resume
        self.fsync = fsync
        self.results_path = self.out_dir / RESULTS_FILE
        self.trajectories_path = self.out_dir / TRAJECTORIES_FILE
        self.summary_path = self.out_dir / SUMMARY_FILE
        self.state = ResumeState()
        self._results: Any = None
        self._trajectories: Any = None

    # -- setup

    def _prepare_folder(self) -> None:
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise OutputError(
                f"output folder {self.out_dir} exists and is not a folder; "
                "pass --out with a folder path"
            ) from None
        except OSError as exc:
            raise OutputError(
                f"cannot create output folder {self.out_dir}: {exc.strerror or exc}; "
                "pass --out with a writable folder"
            ) from None
        try:
            with tempfile.TemporaryFile(dir=self.out_dir):
                pass
        except OSError as exc:
            raise OutputError(
                f"output folder {self.out_dir} is not writable: {exc.strerror or exc}; "
                "pass --out with a writable folder"
            ) from None

    def _has_content(self, path: Path) -> bool:
        try:
            return path.stat().st_size > 0
        except FileNotFoundError:
            return False

    def _recover(self) -> None:
        """Make the folder consistent after a killed run (resume only): a torn
        last results line goes; of a run key recorded twice the first line is
        kept; an episode whose trajectory lost a line (damaged, or missing) is
        dropped with its results line, to run again; trajectory lines of
        episodes without a results line go. Both files are read a line at a
        time, and rewritten only when something goes; what is held is a few
        bytes per planned episode."""
        self._truncate_torn_results()
        tally = _Tally(self.keys, self.trajectories_path)
        done = bytearray(len(self.keys))
        dropped_results = 0
        if self.results_path.exists():
            for record in ResultsReader(self.results_path):
                index = self._planned(record["run_key"])
                if done[index]:
                    self.state.duplicate_results += 1
                elif not tally.complete(index, record.get("episode_id"), len(record["steps"])):
                    self.state.damaged_episodes += 1
                else:
                    done[index] = 1
                    continue
                dropped_results += 1
        if dropped_results:
            self._rewrite_results(done)
        self.state.done = done
        self.state.records = done.count(1)
        if dropped_results or tally.lines_read > tally.lines_of(done):
            self.state.dropped_trajectory_lines = self._rewrite_trajectories(tally, done)

    def _planned(self, key: str) -> int:
        index = self.keys.position(key)
        if index is None:
            raise OutputError(
                f"{self.results_path} records episode {key}, which the plan does not "
                "hold; resume with the options of that run",
                usage=True,
            )
        return index

    def _truncate_torn_results(self) -> None:
        """Cut a torn last line (one killed while written) off results.jsonl: the
        bytes after the last newline, found reading backwards a block at a time."""
        if not self.results_path.exists():
            return
        with open(self.results_path, "rb") as handle:
            size = end = handle.seek(0, os.SEEK_END)
            while end > 0:
                start = max(0, end - (1 << 16))
                handle.seek(start)
                newline = handle.read(end - start).rfind(b"\n")
                if newline != -1:
                    end = start + newline + 1
                    break
                end = start
            handle.seek(end)
            torn = handle.read(size - end)
        if torn:  # the episode it described is run again
            os.truncate(self.results_path, end)
            self.state.torn_results_line = bool(torn.strip())

    def _rewrite_results(self, done: bytearray) -> None:
        """results.jsonl with the first line of each plan index in ``done`` only."""
        written = bytearray(len(done))

        def lines() -> Iterator[bytes]:
            for record in ResultsReader(self.results_path):
                index = self.keys.position(record["run_key"])
                if index is not None and done[index] and not written[index]:
                    written[index] = 1
                    yield dumps_line(record)

        atomic_write_lines(self.results_path, lines())
        self._reopen_results()

    def _rewrite_trajectories(self, tally: _Tally, done: bytearray) -> int:
        """trajectories.jsonl with the lines of the episodes in ``done`` only
        (each step once, in order); returns how many lines went."""
        kept = _Tally(self.keys)
        dropped = 0

        def lines() -> Iterator[bytes]:
            nonlocal dropped
            with open(self.trajectories_path, "rb") as handle:
                for line in handle:
                    index, episode, step = _line_identity(line, self.keys)
                    if index is None or not done[index] or not tally.owns(index, episode):
                        dropped += 1
                    elif kept.add(index, episode, step):
                        yield line
                    else:
                        dropped += 1

        atomic_write_lines(self.trajectories_path, lines())
        return dropped

    def open(self) -> ResumeState:
        """Prepare the folder and open the files for appending.

        Raises :class:`OutputError` when the folder cannot be created or written,
        or, without ``resume``, when it already holds a run.
        """
        self._prepare_folder()
        self._results = self._open_append(self.results_path)
        try:
            self._lock()
            if not self.resume:
                for path in (self.results_path, self.trajectories_path):
                    if self._has_content(path):
                        raise OutputError(
                            f"output folder {self.out_dir} already holds {path.name}; "
                            "pass --resume to continue that run, or a new --out folder",
                            usage=True,
                        )
            else:
                try:
                    self._recover()
                except OSError as exc:
                    raise OutputError(
                        f"cannot resume from {self.out_dir}: {exc.strerror or exc}"
                    ) from None
            self._trajectories = self._open_append(self.trajectories_path)
        except BaseException:
            self.close()  # and the lock with it
            raise
        return self.state

    def _open_append(self, path: Path) -> Any:
        # Unbuffered, for appending: each write() is one system call.
        try:
            return open(path, "ab", buffering=0)
        except OSError as exc:
            raise OutputError(
                f"cannot open output files in {self.out_dir}: {exc.strerror or exc}"
            ) from None

    def _reopen_results(self) -> None:
        """Append to (and lock) the results file that replaced the one opened:
        the old handle writes to a file no longer in the folder."""
        old = self._results
        self._results = self._open_append(self.results_path)
        self._lock()
        old.close()

    def _lock(self) -> None:
        # An advisory lock on the open results file: released by close() and
        # by the system when the process ends, however it ends.
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not a POSIX system: no lock
            return
        try:
            fcntl.flock(self._results.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputError(
                f"output folder {self.out_dir} is in use by another chaosops run (it holds "
                f"{RESULTS_FILE} locked); wait for that run to end, or pass another --out",
                usage=True,
            ) from None
        except OSError:  # a file system without locks (some network mounts): go on
            return

    def close(self) -> None:
        """Close the files (idempotent); the folder's lock goes with them."""
        for handle in (self._trajectories, self._results):
            if handle is not None:
                handle.close()
        self._trajectories = self._results = None

    def __enter__(self) -> RunOutputs:
        self.open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- writing

    def _write(self, handle: Any, data: bytes) -> None:
        try:
            view = memoryview(data)
            while view:
                written = handle.write(view)
                view = view[written:]
            if self.fsync:
                os.fsync(handle.fileno())
        except OSError as exc:  # a full disk, say: the error names the file
            if exc.filename is not None or exc.errno is None:
                raise
            raise OSError(exc.errno, exc.strerror, str(handle.name)) from exc

    def write_episode(
        self,
        result: Any,
        *,
        policy: str,
        key: str,
        render: Renderer | None = None,
        turn_timeout: Any = None,
        roles: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Append one finished episode: trajectory lines first, then its results line
        (``turn_timeout``: the deadline it ran under, see :func:`deadline_fields`;
        ``roles``: what played each role, see :func:`result_record`).

        Returns the results record.
        """
        if self._results is None or self._trajectories is None:
            raise RuntimeError("RunOutputs.write_episode() before open()")
        trajectory, results_line, record = episode_lines(
            result, policy=policy, key=key, render=render, turn_timeout=turn_timeout, roles=roles
        )
        self.write_lines(trajectory, results_line)
        return record

    def write_lines(self, trajectory: bytes, results_line: bytes) -> None:
        """Append an episode's lines made by :func:`episode_lines` (here, or in a
        Ray worker): trajectory lines first, then the results line."""
        if self._results is None or self._trajectories is None:
            raise RuntimeError("RunOutputs.write_lines() before open()")
        if trajectory:
            self._write(self._trajectories, trajectory)
        self._write(self._results, results_line)

    def write_summary(self, summary: Mapping[str, Any]) -> Path:
        """Write ``summary.json`` atomically; returns its path."""
        data = orjson.dumps(summary, default=_default, option=orjson.OPT_INDENT_2) + b"\n"
        atomic_write_bytes(self.summary_path, data)
        return self.summary_path


def iter_lines(path: Path) -> Iterator[dict[str, Any]]:
    """Whole JSON lines of a JSONL file, read one at a time (a torn last line is skipped)."""
    with open(path, "rb") as handle:
        for line in handle:
            if line.endswith(b"\n") and line.strip():
                yield orjson.loads(line)
