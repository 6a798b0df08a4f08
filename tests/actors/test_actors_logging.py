"""Structured logs: JSON lines flushed as written, silent until configured."""

from __future__ import annotations

import enum
import io
import json
import re
import threading
import types
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple

import pydantic
import pytest
import structlog
from actors_toy import ToyEnv, act, instant_policies, run_kwargs
from structlog.contextvars import bound_contextvars

from actors import (
    _logging,
    configure_logging,
    current_turn,
    disable_logging,
    get_logger,
    json_safe,
    logging_to,
    run_episode,
    run_jobs,
)
from actors._logging import log_enabled


@pytest.fixture(autouse=True)
def _clean_logging() -> Any:
    disable_logging()
    yield
    disable_logging()


@pytest.mark.asyncio
async def test_unconfigured_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert not log_enabled()
    await run_episode(ToyEnv(steps=8), policies=instant_policies(), **run_kwargs())
    get_logger().info("should_not_print")
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


@pytest.mark.asyncio
async def test_log_file_has_one_turn_line_per_step_readable_mid_run(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "run.jsonl"
    run_id = configure_logging(path, run_id="run-42")
    assert run_id == "run-42"
    mid_run: list[int] = []

    def peeking(obs: Any, role: str) -> Any:
        lines = path.read_text().splitlines()
        mid_run.append(sum(json.loads(line)["event"] == "turn" for line in lines))
        return act(role)

    async def job(n: int) -> Any:
        policies = instant_policies()
        policies["c"] = peeking
        return await run_episode(
            ToyEnv(steps=8),
            policies=policies,
            **run_kwargs(describe_turn=lambda r: {"step": r.next_observation.step}),
        )

    traces = await run_jobs(range(3), job, concurrency=1)
    assert mid_run == [2, 6, 10, 14, 18, 22]  # every earlier turn already on disk
    records = [json.loads(line) for line in path.read_text().splitlines()]
    turns = [r for r in records if r["event"] == "turn"]
    assert len(turns) == sum(len(t.turns) for t in traces) == 24
    expected = {
        "timestamp", "level", "event", "run_id", "episode_id", "turn", "step", "role",
        "reward", "done", "timed_out", "error", "latency_ms",
    }  # fmt: skip
    for record in turns:
        assert expected <= record.keys()
        assert record["run_id"] == "run-42" and record["level"] == "info"
        assert record["timestamp"].endswith("Z")
    events = [r["event"] for r in records]
    assert events[0] == "run_started" and events[-1] == "run_finished"
    assert events.count("episode_started") == events.count("episode_finished") == 3


@pytest.mark.asyncio
async def test_stream_target_and_levels() -> None:
    stream = io.StringIO()
    configure_logging(stream, level="warning")
    assert not log_enabled()
    await run_episode(ToyEnv(steps=4), policies=instant_policies(), **run_kwargs())
    assert stream.getvalue() == ""
    get_logger().warning("careful", x=1)
    line = json.loads(stream.getvalue())
    assert line["event"] == "careful" and line["x"] == 1 and line["level"] == "warning"
    with pytest.raises(ValueError, match="level"):
        configure_logging(stream, level="loud")


def test_configure_logging_refuses_what_it_cannot_write_to(tmp_path: Path) -> None:
    path = tmp_path / "kept.jsonl"
    configure_logging(path)
    try:
        get_logger().info("before")
        with open(tmp_path / "b.log", "wb") as binary:
            with pytest.raises(TypeError, match="is a binary stream; pass its path"):
                configure_logging(binary)
        with pytest.raises(TypeError, match=r"must be a path, '-' \(stdout\), an open text"):
            configure_logging(123)  # type: ignore[arg-type]
        get_logger().info("after")  # the configuration in place is untouched
    finally:
        disable_logging()
    assert [json.loads(line)["event"] for line in path.read_text().splitlines()] == [
        "before",
        "after",
    ]


@pytest.mark.asyncio
async def test_pretty_console() -> None:
    stream = io.StringIO()
    configure_logging(stream, pretty=True)
    get_logger().info("hello", who="world")
    assert "hello" in stream.getvalue() and "who" in stream.getvalue()
    assert "\x1b[" not in stream.getvalue()  # not a terminal: no colour codes


@pytest.mark.asyncio
async def test_pretty_to_a_file_writes_the_file_and_leaves_stdout_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pretty.log"
    configure_logging(path, pretty=True)
    await run_episode(ToyEnv(steps=3), policies=instant_policies(), **run_kwargs())
    text = path.read_text()  # flushed as written: readable before anything is closed
    assert text.count(" turn ") == 3 and "episode_finished" in text and "\x1b[" not in text
    assert capsys.readouterr().out == ""
    disable_logging()  # closes the file
    assert path.read_text() == text


# ------------------------------------------------------- lines, fields, values

ISO_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    assert len(set(keys)) == len(keys), f"a key twice in a line: {keys}"
    return dict(pairs)


def _records(path: Path) -> list[dict[str, Any]]:
    lines = path.read_bytes().decode().splitlines()
    return [json.loads(line, object_pairs_hook=_unique_keys) for line in lines]


@pytest.mark.asyncio
async def test_what_json_cannot_hold_is_replaced_and_the_turn_line_still_written(
    tmp_path: Path,
) -> None:
    # A lone surrogate (json.loads('"\\ud800"') gives one: an LLM's answer may
    # hold it) and a list that holds itself: neither orjson nor msgspec writes
    # them. The line is written all the same, the episode goes on.
    looped: list[Any] = []
    looped.append(looped)

    def policy(obs: Any, role: str) -> Any:
        current_turn().annotate(model=json.loads('"m\\ud800"'))
        return act(role, json.loads('"x\\ud800"'))

    path = tmp_path / "run.jsonl"
    configure_logging(path)
    policies = {**instant_policies(), "a": policy}
    trace = await run_episode(
        ToyEnv(steps=4), policies=policies,
        **run_kwargs(describe_turn=lambda r: {"action": r.action, "looped": looped}),
    )  # fmt: skip
    assert trace.status == "ok" and len(trace.turns) == 4
    turns = [r for r in _records(path) if r["event"] == "turn"]
    assert [t["turn"] for t in turns] == [0, 1, 2, 3]
    assert turns[0]["action"] == ["x\\ud800", "a"] and turns[0]["model"] == "m\\ud800"
    assert turns[0]["looped"] == ["<cycle>"] and turns[1]["action"] == ["act", "b"]


def test_json_safe_keeps_what_json_holds_and_replaces_the_rest() -> None:
    deep: list[Any] = []
    inner = deep
    for _ in range(70):
        inner.append([])
        inner = inner[0]
    both = {"x": 1}
    plain = {"s": "caf\u00e9", "n": [1, 2.5, None, True], "k": {"a": {"b": "c"}}}
    assert json_safe(plain) == plain
    assert json_safe({"shared": [both, both]}) == {"shared": [{"x": 1}, {"x": 1}]}  # no cycle
    assert json_safe({1: "\ud800", (2, 3): 2**70}) == {"1": "\\ud800", "(2, 3)": str(2**70)}
    assert json_safe(Color.RED) == "red" and json_safe({"p": Path("a/b")}) == {"p": "a/b"}
    assert (
        json_safe(ValueError("no")) == "ValueError: no"
        and json_safe(Decimal("1.5")) == "Decimal('1.5')"
    )
    cut = json_safe(deep)
    for _ in range(64):
        cut = cut[0]
    assert cut == "<too deep>"


def test_a_whole_line_per_event_with_the_common_fields(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    run_id = configure_logging(path)
    log = get_logger()
    for i in range(50):
        log.info("turn", turn=i, note="line\nbreak")  # a newline in a value stays escaped
        assert path.read_bytes().count(b"\n") == i + 1  # on disk before the call returns
    log.debug("too_fine")  # below the configured level
    records = _records(path)
    assert [r["turn"] for r in records] == list(range(50))
    for record in records:
        assert record["event"] == "turn" and record["level"] == "info"
        assert record["run_id"] == run_id and record["note"] == "line\nbreak"
        assert ISO_UTC.match(record["timestamp"]), record["timestamp"]
    stamp = datetime.fromisoformat(records[-1]["timestamp"].replace("Z", "+00:00"))
    assert abs((datetime.now(UTC) - stamp).total_seconds()) < 60


def test_lines_from_many_threads_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    configure_logging(path)
    log = get_logger()
    payload = "x" * 20_000  # well over any stream buffer: one write call per line

    def spam(n: int) -> None:
        for i in range(100):
            log.info("spam", thread=n, i=i, payload=payload)

    threads = [threading.Thread(target=spam, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    data = path.read_bytes()
    assert data.endswith(b"\n")
    records = _records(path)
    assert len(records) == 400 and all(r["payload"] == payload for r in records)
    assert sorted((r["thread"], r["i"]) for r in records) == [
        (n, i) for n in range(4) for i in range(100)
    ]


def test_timestamps_are_utc_iso_with_microseconds_and_the_time_of_the_event(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.jsonl"
    configure_logging(path)
    before = datetime.now(UTC)
    for _ in range(3):
        get_logger().info("tick")
    after = datetime.now(UTC)
    stamps = [r["timestamp"] for r in _records(path)]
    assert all(ISO_UTC.match(stamp) for stamp in stamps)
    for stamp in stamps:  # six digits of microseconds, always (never dropped at .000000)
        assert len(stamp) == len("2026-11-22T10:00:01.000005Z")
        assert before <= datetime.fromisoformat(stamp.replace("Z", "+00:00")) <= after


class Color(enum.Enum):
    RED = "red"


class Role(enum.StrEnum):
    SRE = "sre"


class Level(enum.IntEnum):
    HIGH = 3


class Model(pydantic.BaseModel):
    name: str
    when: Path


class Pair(NamedTuple):
    a: int
    b: str


# Values JSON has no form for, each with the form its line gives it. Lines
# are rendered by orjson, or by msgspec where orjson refuses a value (a set,
# bytes, a key that is not a string, an int past 64 bits...): the second half.
_ODD_VALUES = {
    "color": (Color.RED, "red"),
    "strenum": (Role.SRE, "sre"),
    "level_": (Level.HIGH, 3),
    "path": (Path("/tmp/x.json"), "/tmp/x.json"),
    "model": (Model(name="m", when=Path("a/b")), {"name": "m", "when": "a/b"}),
    "exc": (ValueError("bad"), "ValueError: bad"),
    "when": (datetime(2026, 11, 22, 10, 0, 1, 5, tzinfo=UTC), "2026-11-22T10:00:01.000005Z"),
    "nan": (float("nan"), None),
    "obj": (object(), "<object object"),
}
_REFUSED_BY_ORJSON = {
    "tags": ({"only"}, ["only"]),
    "args": ({1: "int key", Role.SRE: "enum key"}, {"1": "int key", "sre": "enum key"}),
    "big": (2**70, 2**70),
    "raw": (b"\x00\xff", "AP8="),
    "amount": (Decimal("1.50"), "1.50"),
    "pair": (Pair(1, "x"), [1, "x"]),
}


@pytest.mark.parametrize("way", ["logger", "turn"])
@pytest.mark.parametrize("values", [_ODD_VALUES, {**_ODD_VALUES, **_REFUSED_BY_ORJSON}])
@pytest.mark.asyncio
async def test_values_json_cannot_hold_are_still_rendered(
    tmp_path: Path, way: str, values: dict[str, Any]
) -> None:
    path = tmp_path / "run.jsonl"
    configure_logging(path)
    fields = {key: value for key, (value, _) in values.items()}
    if way == "logger":
        get_logger().info("values", **fields)
    else:  # described fields of the runtime's turn line
        await run_episode(ToyEnv(steps=1), policies=instant_policies(),
                          **run_kwargs(describe_turn=lambda record: dict(fields)))  # fmt: skip
    (record,) = [r for r in _records(path) if r["event"] in ("values", "turn")]
    for key, (_, shown) in values.items():
        if key == "obj":
            assert record[key].startswith(shown)
        else:
            assert record[key] == shown, key


def test_exception_traceback_is_rendered(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    configure_logging(path)
    try:
        1 / 0  # noqa: B018
    except ZeroDivisionError as exc:
        get_logger().error("policy_error", role="a", exc_info=exc)
        get_logger().exception("crashed")
    first, second = _records(path)
    for record in (first, second):
        assert record["level"] == "error" and "exc_info" not in record
        assert record["exception"].startswith("Traceback (most recent call last)")
        assert "ZeroDivisionError: division by zero" in record["exception"]


@pytest.mark.asyncio
async def test_policy_error_line_carries_the_traceback(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    configure_logging(path)

    def broken(obs: Any, role: str) -> Any:
        raise RuntimeError("policy bug")

    policies = instant_policies()
    policies["b"] = broken
    trace = await run_episode(ToyEnv(steps=4), policies=policies, **run_kwargs())
    assert trace.errors == 1
    (error,) = [r for r in _records(path) if r["event"] == "policy_error"]
    assert error["role"] == "b" and error["episode_id"] == trace.episode_id
    assert "Traceback" in error["exception"] and "RuntimeError: policy bug" in error["exception"]


@pytest.mark.asyncio
async def test_what_a_policy_logs_carries_its_episode_role_and_turn(tmp_path: Path) -> None:
    # A sync, an async and an in_thread policy log with structlog during their
    # turns: each line has the episode, role and turn of the turn line it
    # belongs to; the episode's own events carry neither role nor turn.
    import anyio.lowlevel

    from actors import in_thread

    path = tmp_path / "run.jsonl"
    configure_logging(path)
    log = structlog.get_logger()

    def sync_policy(obs: Any, role: str) -> Any:
        log.info("thinking", how="sync")
        return act(role)

    async def async_policy(obs: Any, role: str) -> Any:
        await anyio.lowlevel.checkpoint()
        log.info("thinking", how="async")
        return act(role)

    policies = {"a": sync_policy, "b": async_policy, "c": in_thread(sync_policy), "d": sync_policy}
    traces = [
        await run_episode(ToyEnv(steps=8), policies=dict(policies), **run_kwargs())
        for _ in range(2)
    ]
    records = _records(path)

    def keys(event: str) -> list[tuple[str, str, int]]:
        return [(r["episode_id"], r["role"], r["turn"]) for r in records if r["event"] == event]

    turns, thinking = keys("turn"), keys("thinking")
    assert len(turns) == 16 and thinking == turns
    assert {t.episode_id for t in traces} == {episode for episode, _, _ in turns}
    for record in records:
        if record["event"].startswith("episode_"):
            assert "role" not in record and "turn" not in record
    get_logger().info("after")  # outside any episode: nothing of one
    assert not {"episode_id", "role", "turn"} & _records(path)[-1].keys()


def test_context_bound_fields_and_explicit_fields(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    configure_logging(path, run_id="r")
    with bound_contextvars(episode_id="from-context", user="alice"):
        get_logger().info("one")
        get_logger().info("two", episode_id="explicit")  # explicit beats the context
        get_logger().bind(job=7).info("three", n=1)
        get_logger().info("four %s of %d", "part", 2)
    get_logger().info("five")  # context gone
    one, two, three, four, five = _records(path)
    assert one["episode_id"] == "from-context" and one["user"] == "alice"
    assert two["episode_id"] == "explicit" and two["user"] == "alice"
    assert three["job"] == 7 and three["n"] == 1 and three["user"] == "alice"
    assert four["event"] == "four part of 2"
    assert "user" not in five and five["run_id"] == "r"


def test_levels_and_capture_logs_after_configuring(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    configure_logging(path, level="warning")
    log = get_logger()
    log.info("dropped")
    log.warning("kept")
    with structlog.testing.capture_logs() as captured:
        log.error("captured", x=1)
    assert [(e["event"], e["log_level"], e["x"]) for e in captured] == [("captured", "error", 1)]
    assert [r["event"] for r in _records(path)] == ["kept"]


def test_unconfigured_logging_writes_nothing_below_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log = get_logger()
    assert not log_enabled(_logging.INFO) and log_enabled(_logging.ERROR)
    for name in ("debug", "info"):
        getattr(log, name)("quiet", x=1)
    assert capsys.readouterr() == ("", "")


def test_an_unconfigured_warning_reaches_a_strict_stderr_with_what_it_cannot_encode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A parse_error's raw answer may hold a lone surrogate; standard error in
    # strict UTF-8 (a file, a pipe) cannot take it: escaped, not an error.
    raw = io.BytesIO()
    strict = io.TextIOWrapper(raw, encoding="utf-8", errors="strict")
    monkeypatch.setattr("sys.stderr", strict)
    get_logger().warning("parse_error", raw=json.loads('"x\\ud800"'))
    strict.flush()
    assert b"parse_error" in raw.getvalue() and b"\\ud800" in raw.getvalue()


@pytest.mark.asyncio
async def test_unconfigured_policy_error_prints_a_plain_traceback_without_locals_to_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # structlog's default console renderer shows every frame's local variables
    # (here a whole observation and the actor's state: ~100 lines an error).
    def broken(obs: Any, role: str) -> Any:
        secret_local = "do-not-print-me"  # noqa: F841
        raise RuntimeError("policy bug")

    policies = instant_policies()
    policies["b"] = broken
    trace = await run_episode(ToyEnv(steps=4), policies=policies, **run_kwargs())
    assert trace.errors == 1
    # On standard error: a program's standard output is its results.
    captured = capsys.readouterr()
    assert captured.out == ""
    out = captured.err
    assert "policy_error" in out and "RuntimeError: policy bug" in out
    assert "Traceback (most recent call last)" in out
    assert "do-not-print-me" not in out and "observation =" not in out
    assert len(out.splitlines()) < 15, out


def test_unconfigured_runtime_follows_an_application_s_structlog_config() -> None:
    # An application that configured structlog itself gets the runtime's
    # warnings and errors through its own chain (and still nothing below).
    sink = io.StringIO()
    structlog.configure(
        processors=[structlog.processors.JSONRenderer()],
        logger_factory=structlog.WriteLoggerFactory(sink),
    )
    get_logger().info("dropped")
    get_logger().error("late_reply_dropped", turn=3)
    assert [json.loads(line) for line in sink.getvalue().splitlines()] == [
        {"turn": 3, "event": "late_reply_dropped"}
    ]


def test_reconfiguring_closes_the_previous_file(tmp_path: Path) -> None:
    first, second = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    configure_logging(first)
    get_logger().info("a")
    configure_logging(second)
    get_logger().info("b")
    assert [r["event"] for r in _records(first)] == ["a"]
    assert [r["event"] for r in _records(second)] == ["b"]


def test_logging_to_a_block_gives_the_configuration_before_it_back(tmp_path: Path) -> None:
    outer, inner = tmp_path / "outer.jsonl", tmp_path / "inner.jsonl"
    run_id = configure_logging(outer)
    get_logger().info("before")
    with logging_to(inner, level="warning") as inner_id:
        get_logger().warning("inside")
        get_logger().info("below the block's level")
    get_logger().info("after")
    assert [r["event"] for r in _records(outer)] == ["before", "after"]
    assert {r["run_id"] for r in _records(outer)} == {run_id} != {inner_id}
    assert [r["event"] for r in _records(inner)] == ["inside"]
    assert _logging.STATE.file is not None and not _logging.STATE.file.closed


def test_logging_to_a_block_leaves_an_unconfigured_runtime_and_the_app_s_structlog(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with logging_to(tmp_path / "inner.jsonl"):
        get_logger().warning("parse_error")
    get_logger().info("dropped")  # unconfigured again: nothing below warning
    assert not structlog.is_configured() and capsys.readouterr() == ("", "")
    sink = io.StringIO()
    structlog.configure(processors=[structlog.processors.JSONRenderer()],
                        logger_factory=structlog.WriteLoggerFactory(sink))  # fmt: skip
    with logging_to(tmp_path / "again.jsonl"):
        get_logger().warning("inside")
    get_logger().error("outside")
    assert [json.loads(line)["event"] for line in sink.getvalue().splitlines()] == ["outside"]
    assert [r["event"] for r in _records(tmp_path / "again.jsonl")] == ["inside"]


@pytest.mark.asyncio
async def test_disable_logging_closes_the_file_and_silences_the_runtime(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.jsonl"
    configure_logging(path)
    await run_episode(ToyEnv(steps=4), policies=instant_policies(), **run_kwargs())
    written = path.read_bytes()
    file = _logging.STATE.file
    disable_logging()
    assert file is not None and file.closed and not log_enabled()
    await run_episode(ToyEnv(steps=4), policies=instant_policies(), **run_kwargs())
    get_logger().info("after")
    assert path.read_bytes() == written  # kept, and nothing more
    assert [r["event"] for r in _records(path)].count("turn") == 4
    assert capsys.readouterr() == ("", "")


def test_events_with_the_chains_own_keys_or_exc_info(tmp_path: Path) -> None:
    # Fields or context variables named like the chain's own members, and an
    # exc_info: the event's run_id wins, the chain sets level and timestamp.
    path = tmp_path / "run.jsonl"
    configure_logging(path, run_id="r")
    fields = {"run_id": "mine", "level": "nope", "timestamp": "then", "n": 1}
    with bound_contextvars(event="bound", job="j"):
        get_logger().info("turn", **fields)
    try:
        raise KeyError("boom")
    except KeyError:
        get_logger().error("policy_error", exc_info=True, turn=3)
    line, error = _records(path)
    assert line.pop("timestamp") != "then"
    assert line == {"run_id": "mine", "level": "info", "event": "turn", "n": 1, "job": "j"}
    assert error["level"] == "error" and "KeyError: 'boom'" in error["exception"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
@pytest.mark.asyncio
async def test_a_log_write_that_fails_names_the_log_file() -> None:
    """A full disk under the log: the error says which file, on every way a
    line is written (the runtime's events, the turn line, the logger)."""
    configure_logging("/dev/full")
    with pytest.raises(OSError, match="No space left on device") as info:
        get_logger().info("note", value=1)
    assert info.value.filename == "/dev/full" and "'/dev/full'" in str(info.value)
    # through the runtime: the episode's failure is that error, not a bare errno
    with pytest.raises(OSError) as info:
        await run_episode(ToyEnv(steps=4), policies=instant_policies(), **run_kwargs())
    assert info.value.filename == "/dev/full"


@pytest.mark.asyncio
async def test_turn_fields_from_any_mapping_and_the_common_ones_win(tmp_path: Path) -> None:
    # describe_turn's dict becomes the event's; another mapping is copied,
    # and the coordinator's own fields win over its keys.
    path = tmp_path / "run.jsonl"
    configure_logging(path)
    described: list[Any] = []

    def describe(record: Any) -> Any:
        mapping = types.MappingProxyType({"step": record.turn + 1, "turn": "theirs"})
        described.append(mapping)
        return mapping

    await run_episode(ToyEnv(steps=2), policies=instant_policies(),
                      **run_kwargs(describe_turn=describe))  # fmt: skip
    turns = [r for r in _records(path) if r["event"] == "turn"]
    assert [(r["turn"], r["step"]) for r in turns] == [(0, 1), (1, 2)]
    assert [dict(m) for m in described] == [{"step": 1, "turn": "theirs"},
                                            {"step": 2, "turn": "theirs"}]  # fmt: skip


def _burst_from_threads(log: Any) -> None:
    # log(n, i) for i in range(200) from three threads and this one at once.
    def burst(n: int) -> None:
        for i in range(200):
            log(n, i)

    threads = [threading.Thread(target=burst, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    burst(3)
    for thread in threads:
        thread.join()


def test_events_from_many_threads_keep_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    configure_logging(path)
    payload = "z" * 300
    _burst_from_threads(lambda n, i: get_logger().info("turn", thread=n, i=i, payload=payload))
    records = _records(path)
    assert sorted((r["thread"], r["i"]) for r in records) == [
        (n, i) for n in range(4) for i in range(200)
    ]
    assert all(r["payload"] == payload for r in records)


# ------------------------------------------------------------------ turn lines


@pytest.mark.asyncio
async def test_turn_lines_keep_the_runtime_s_fields_over_described_ones(tmp_path: Path) -> None:
    # describe_turn's keys named like the runtime's or the chain's own: the
    # runtime's turn fields, the event and the level win; a run_id given wins.
    path = tmp_path / "run.jsonl"
    configure_logging(path, run_id="r")

    def describe(record: Any) -> dict[str, Any]:
        return {"turn": "theirs", "event": "nope", "level": "x", "run_id": "mine", "step": 1}

    with bound_contextvars(job="j"):
        await run_episode(ToyEnv(steps=1), policies=instant_policies(),
                          **run_kwargs(describe_turn=describe))  # fmt: skip
    (turn,) = [r for r in _records(path) if r["event"] == "turn"]
    assert (turn["turn"], turn["level"], turn["run_id"], turn["step"]) == (0, "info", "mine", 1)
    assert turn["job"] == "j" and ISO_UTC.match(turn["timestamp"])


@pytest.mark.asyncio
async def test_turn_lines_are_captured_as_event_dicts(tmp_path: Path) -> None:
    configure_logging(tmp_path / "run.jsonl")
    with structlog.testing.capture_logs() as captured:
        await run_episode(ToyEnv(steps=2), policies=instant_policies(), **run_kwargs())
    turns = [e for e in captured if e["event"] == "turn"]
    assert [(e["turn"], e["role"], e["log_level"]) for e in turns] == [
        (0, "a", "info"),
        (1, "b", "info"),
    ]
    assert _records(tmp_path / "run.jsonl") == []  # captured, not written


def test_the_runtime_s_events_are_the_lines_its_logger_would_write(tmp_path: Path) -> None:
    # emit() runs the configured chain on the runtime's own event dict; the
    # line is the one get_logger().info(...) writes, key for key and in order.
    path = tmp_path / "run.jsonl"
    configure_logging(path, run_id="r1")
    fields = {"episode_id": "e", "turn": 3, "args": {"to": "all"}, "error": None}
    with bound_contextvars(worker=2):
        get_logger().info("turn", **fields)
        _logging.emit("turn", dict(fields))
    by_logger, by_emit = ({k: v for k, v in r.items() if k != "timestamp"} for r in _records(path))
    assert list(by_emit.items()) == list(by_logger.items())
    assert by_emit["worker"] == 2 and by_emit["level"] == "info" and by_emit["run_id"] == "r1"
    # structlog's own capture sees them too (it changes the configured chain in place)
    with structlog.testing.capture_logs() as events:
        _logging.emit("episode_started", {"episode_id": "e"})
    assert events == [{"episode_id": "e", "event": "episode_started", "log_level": "info"}]
    assert len(_records(path)) == 2  # and nothing reached the file meanwhile
    _logging.emit("turn", {"turn": 4})
    assert _records(path)[-1]["turn"] == 4  # the chain is back


def test_the_runtime_s_events_on_a_console_and_unconfigured(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("-", pretty=True)
    _logging.emit("turn", {"turn": 1, "role": "sre"})
    out = capsys.readouterr().out
    assert "turn" in out and "role" in out and "sre" in out
    disable_logging()
    _logging.emit("turn", {"turn": 2})  # below warning, unconfigured: nothing
    assert capsys.readouterr() == ("", "")
