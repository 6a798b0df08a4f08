"""The coordinator and its actors: turn order, fallbacks, errors, env failures."""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import os
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from actors_toy import (
    ROLES,
    Obs,
    ToyEnv,
    act,
    captured_events,
    instant_policies,
    noop,
    run_kwargs,
)

from actors import (
    configure_logging,
    current_turn,
    disable_logging,
    in_thread,
    new_episode_id,
    run_episode,
)


@pytest.mark.asyncio
async def test_plays_every_role_in_turn_until_done() -> None:
    async def async_policy(obs: Any, role: str) -> Any:
        await anyio.lowlevel.checkpoint()
        return act(role, "async")

    policies: dict[str, Any] = instant_policies()
    policies["b"] = async_policy
    env = ToyEnv(steps=8)
    trace = await run_episode(env, policies=policies, **run_kwargs())
    assert trace.status == "ok" and trace.error is None
    assert [r.turn for r in trace.turns] == list(range(8))
    assert [r.role for r in trace.turns] == list(ROLES) * 2
    assert env.applied == [act(r, "async" if r == "b" else "act") for r in ROLES * 2]
    assert trace.final_observation.done
    assert all(not r.timed_out and r.error is None for r in trace.turns)
    assert trace.turns[0].observation.step == 0 and trace.turns[0].next_observation.step == 1


@pytest.mark.asyncio
async def test_record_turns_off_leaves_the_records_to_after_step() -> None:
    seen: list[int] = []
    trace = await run_episode(
        ToyEnv(steps=6),
        policies=instant_policies(),
        after_step=lambda env, record: seen.append(record.turn),
        record_turns=False,
        **run_kwargs(),
    )
    assert trace.turns == [] and seen == list(range(6)) and trace.final_observation.done


def test_episode_ids_are_unique_hex_and_fresh_in_a_forked_child() -> None:
    made = [new_episode_id() for _ in range(10_000)]
    ids = set(made)
    assert len(ids) == 10_000
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    # a person tells them apart from their first characters: the first 16 are a
    # bijection of the process's counter, so they never collide within a process,
    # and neighbours differ at once (15 in 16 for a good scramble; 0.8 is far below)
    assert len({i[:16] for i in made}) == len(made)
    apart = sum(a[0] != b[0] for a, b in itertools.pairwise(made))
    assert apart >= 0.8 * len(made)
    if not hasattr(os, "fork"):
        return
    read, write = os.pipe()
    with warnings.catch_warnings():  # 3.12+ warns about forking with threads; the child only writes
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: report its next id, leave at once
        os.write(write, new_episode_id().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.waitpid(pid, 0)
    os.close(read)
    parent = new_episode_id()
    assert child[16:] != parent[16:] and child not in ids


@pytest.mark.asyncio
async def test_missing_roles_play_the_fallback_and_max_turns_stops() -> None:
    env = ToyEnv(steps=50)
    trace = await run_episode(env, policies={"a": lambda o, r: act(r)}, **run_kwargs(max_turns=6))
    assert len(trace.turns) == 6 and trace.status == "ok"
    assert env.applied == [act("a"), noop("b"), noop("c"), noop("d"), act("a"), noop("b")]


@pytest.mark.asyncio
async def test_hung_async_policy_times_out_and_sees_its_cancellation() -> None:
    seen: list[str] = []

    async def hung(obs: Any, role: str) -> Any:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            seen.append("cancelled")
            raise

    policies = instant_policies()
    policies["a"] = hung
    env = ToyEnv(steps=4)
    trace = await run_episode(env, policies=policies, **run_kwargs(turn_timeout=0.05))
    first = trace.turns[0]
    assert first.timed_out and first.action == noop("a") and first.error is None
    assert 0.045 <= first.latency_s < 0.5
    assert trace.timeouts == 1
    assert seen == ["cancelled"]
    assert env.applied[1:] == [act(r) for r in ROLES[1:]]


@pytest.mark.asyncio
async def test_shielded_late_reply_is_dropped_and_never_applied() -> None:
    calls: list[int] = []

    async def shielded(obs: Any, role: str) -> Any:
        calls.append(current_turn().turn)
        if len(calls) == 1:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.12)
            return act(role, "late")
        return act(role, "fresh")

    policies = instant_policies()
    policies["a"] = shielded
    env = ToyEnv(steps=24)

    with captured_events() as events:
        trace = await run_episode(env, policies=policies, **run_kwargs(turn_timeout={"a": 0.05}))
    assert trace.turns[0].timed_out and trace.turns[0].action == noop("a")
    assert act("a", "late") not in env.applied
    assert all(r.action != act("a", "late") for r in trace.turns)
    late = [e for e in events if e["event"] == "late_reply_dropped"]
    assert [(e["turn"], e["role"]) for e in late] == [(0, "a")]
    # Turns of the other roles had no deadline and were never timed out.
    assert all(not r.timed_out for r in trace.turns if r.role != "a")
    # Once free again, the actor answers in time.
    assert trace.turns[-4].action == act("a", "fresh")


@pytest.mark.asyncio
async def test_episode_ending_during_a_shielded_call_with_a_request_queued() -> None:
    # Role a's first call shields itself past the end of the episode; its next
    # turn's request waits in its inbox and times out too. When the call comes
    # back the episode is over and its inbox closed: the actor leaves quietly
    # (it used to raise ClosedResourceError out of the episode's task group).
    async def shielded(obs: Any, role: str) -> Any:
        if obs.step == 0:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.15)
        return act(role, "late")

    policies = instant_policies()
    policies["a"] = shielded
    env = ToyEnv(steps=8)
    with captured_events() as events:
        trace = await run_episode(env, policies=policies, **run_kwargs(turn_timeout={"a": 0.03}))
    assert trace.status == "ok" and len(trace.turns) == 8
    assert [r.turn for r in trace.turns if r.timed_out] == [0, 4]
    assert act("a", "late") not in env.applied
    late = [(e["turn"], e["role"]) for e in events if e["event"] == "late_reply_dropped"]
    assert late == [(0, "a")]


@pytest.mark.asyncio
async def test_an_answer_after_the_deadline_is_late_even_before_the_turn_closes() -> None:
    # A call that blocks the event loop past its deadline (here a plain policy
    # that sleeps; on a busy loop, any call) answers before the deadline's
    # timer has had a chance to run: the answer is late all the same, never
    # applied, and the turn closes timed out with the annotations made. A
    # late exception is a late reply, not a policy error.
    import time

    def blocks(obs: Any, role: str) -> Any:
        current_turn().annotate(prompt="p")
        time.sleep(0.08)
        return act(role, "late")

    def blocks_then_raises(obs: Any, role: str) -> Any:
        time.sleep(0.08)
        raise RuntimeError("too late to matter")

    policies = instant_policies()
    policies["a"], policies["b"] = blocks, blocks_then_raises
    env = ToyEnv(steps=4)
    with captured_events() as events:
        trace = await run_episode(
            env, policies=policies, **run_kwargs(turn_timeout={"a": 0.03, "b": 0.03})
        )
    a, b = trace.turns[:2]
    assert a.timed_out and a.action == noop("a") and a.error is None and a.info == {"prompt": "p"}
    assert b.timed_out and b.action == noop("b") and b.error is None
    assert a.latency_s >= 0.08 and b.latency_s >= 0.08
    assert act("a", "late") not in env.applied and env.applied[2:] == [act("c"), act("d")]
    assert trace.timeouts == 2 and trace.errors == 0
    late = [(e["turn"], e["role"], e.get("error")) for e in events
            if e["event"] == "late_reply_dropped"]  # fmt: skip
    assert late == [(0, "a", None), (1, "b", "RuntimeError: too late to matter")]
    # The late exception's traceback goes with it (rendered as ``exception``).
    raised = [e.get("exc_info") for e in events if e["event"] == "late_reply_dropped"]
    assert raised[0] is None and isinstance(raised[1], RuntimeError)
    assert not [e for e in events if e["event"] == "policy_error"]


@pytest.mark.asyncio
async def test_blocking_policy_in_thread_times_out() -> None:
    import time

    def blocking(obs: Any, role: str) -> Any:
        time.sleep(0.3)
        return act(role, "slow")

    policies = instant_policies()
    policies["a"] = in_thread(blocking)
    with anyio.fail_after(5):
        trace = await run_episode(
            ToyEnv(steps=4), policies=policies, **run_kwargs(turn_timeout=0.05)
        )
    assert trace.turns[0].timed_out and trace.turns[0].action == noop("a")
    assert trace.turns[0].latency_s < 0.25


@pytest.mark.asyncio
async def test_thread_policy_sees_current_turn() -> None:
    def blocking(obs: Any, role: str) -> Any:
        ctx = current_turn()
        ctx.annotate(thread_turn=ctx.turn)
        return act(role)

    policies = instant_policies()
    policies["b"] = in_thread(blocking)
    trace = await run_episode(ToyEnv(steps=8), policies=policies, **run_kwargs())
    assert [r.info for r in trace.turns if r.role == "b"] == [
        {"thread_turn": 1},
        {"thread_turn": 5},
    ]


@pytest.mark.asyncio
async def test_no_turn_closes_before_its_deadline() -> None:
    """uvloop's loop.time() has a millisecond's resolution and is read once per
    loop iteration: deadlines set and judged on it closed turns up to about a
    millisecond early (instant replies dropped under a 1 ms deadline). Each
    timed-out turn here lasted its deadline at least, on any loop."""
    deadline = 0.0005
    episodes = 16

    async def play() -> list[Any]:
        turns: list[Any] = []
        for _ in range(episodes):
            trace = await run_episode(ToyEnv(steps=12), policies=instant_policies(),
                                      **run_kwargs(turn_timeout=deadline))  # fmt: skip
            turns.extend(trace.turns)
        return turns

    turns = await play()
    late = [t.latency_s for t in turns if t.timed_out]
    assert len(turns) == 12 * episodes
    assert all(latency >= deadline - 5e-5 for latency in late), min(late)


@pytest.mark.asyncio
async def test_an_applied_turns_latency_is_below_its_deadline_on_a_busy_loop() -> None:
    """The answer came at 40 ms under a 60 ms deadline, then the loop was busy for
    60 ms before the coordinator read it: applied, and its latency is the
    answer's (before, the turn recorded about 100 ms)."""

    async def answers_then_the_loop_stalls(obs: Any, role: str) -> Any:
        await anyio.sleep(0.04)
        asyncio.get_running_loop().call_soon(time.sleep, 0.06)  # runs before the reader wakes
        return act(role, "slow")

    policies = instant_policies()
    policies["a"] = answers_then_the_loop_stalls
    trace = await run_episode(ToyEnv(steps=4), policies=policies, **run_kwargs(turn_timeout=0.06))
    first = trace.turns[0]
    assert not first.timed_out and first.action == act("a", "slow")
    assert 0.035 <= first.latency_s < 0.06, first.latency_s


@pytest.mark.asyncio
async def test_per_role_deadlines() -> None:
    async def hung(obs: Any, role: str) -> Any:
        await anyio.sleep_forever()

    async def slow(obs: Any, role: str) -> Any:
        await anyio.sleep(0.1)
        return act(role, "slow")

    policies = instant_policies()
    policies["a"] = hung
    policies["b"] = slow
    trace = await run_episode(
        ToyEnv(steps=4), policies=policies, **run_kwargs(turn_timeout={"a": 0.05, "c": 1.0})
    )
    a, b, c, _ = trace.turns
    assert a.timed_out and a.latency_s < 0.5
    assert not b.timed_out and b.action == act("b", "slow") and b.latency_s >= 0.09
    assert not c.timed_out and c.action == act("c")


@pytest.mark.asyncio
async def test_a_later_turn_with_an_earlier_deadline_closes_on_time() -> None:
    # "a" answers at once under a long deadline, "b" never answers under a short
    # one: b's deadline comes first although a's timer was armed before it.
    async def hung(obs: Any, role: str) -> Any:
        await anyio.sleep_forever()

    policies = instant_policies()
    policies["b"] = hung
    loop = asyncio.get_running_loop()
    trace = await run_episode(
        ToyEnv(steps=8), policies=policies, **run_kwargs(turn_timeout={"a": 30.0, "b": 0.05})
    )
    closed = [t for t in trace.turns if t.role == "b"]
    assert len(closed) == 2 and all(t.timed_out and 0.049 <= t.latency_s < 0.5 for t in closed)
    assert not any(t.timed_out for t in trace.turns if t.role != "b")
    # no deadline timer of the episode outlives it (the standard loop shows its timers)
    if hasattr(loop, "_scheduled"):
        assert all(h.cancelled() for h in loop._scheduled)
    # Same deadline for all: the timer armed for a's turn falls due while b's
    # turn is open, and must not close b before b's own deadline.
    trace = await run_episode(ToyEnv(steps=8), policies=policies, **run_kwargs(turn_timeout=0.05))
    closed = [t for t in trace.turns if t.role == "b"]
    assert len(closed) == 2 and all(t.timed_out and 0.049 <= t.latency_s < 0.5 for t in closed)
    assert not any(t.timed_out for t in trace.turns if t.role != "b")


@pytest.mark.asyncio
async def test_invalid_turn_timeout_is_rejected() -> None:
    with pytest.raises(ValueError, match="turn_timeout"):
        await run_episode(ToyEnv(), policies=instant_policies(), **run_kwargs(turn_timeout=-1))


@pytest.mark.parametrize(
    ("turn_timeout", "message"),
    [
        ("5", r"turn_timeout must be a number of seconds >= 0, a mapping role -> seconds, "
              r"or None; got '5'"),
        (-1, r"^turn_timeout must be a number of seconds >= 0, got -1$"),
        (float("nan"), r"^turn_timeout must be a number of seconds >= 0, got nan$"),
        ({"a": "x"}, r"^turn_timeout for role 'a' must be a number of seconds >= 0, got 'x'$"),
        # also for a role without a policy, and with no policy at all
        ({"b": -5}, r"^turn_timeout for role 'b' must be a number of seconds >= 0, got -5$"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("with_policies", [True, False])
@pytest.mark.asyncio
async def test_bad_turn_timeout_says_what_is_accepted_before_the_episode_starts(
    turn_timeout: Any, message: str, with_policies: bool
) -> None:
    env = ToyEnv(fail_reset=True)  # a reset would end the episode "failed", not raise
    policies = instant_policies() if with_policies else {}
    with captured_events() as events, pytest.raises(ValueError, match=message):
        await run_episode(env, policies=policies, **run_kwargs(turn_timeout=turn_timeout))
    assert events == []  # nothing started, nothing logged


@pytest.mark.parametrize("max_turns", [0, -1, 2.5, True])
@pytest.mark.asyncio
async def test_max_turns_must_be_a_positive_integer(max_turns: Any) -> None:
    env = ToyEnv(fail_reset=True)  # a reset would end the episode "failed", not raise
    with pytest.raises(ValueError, match=rf"max_turns must be an integer >= 1, got {max_turns!r}"):
        await run_episode(env, policies=instant_policies(), **run_kwargs(max_turns=max_turns))


@pytest.mark.asyncio
async def test_policy_errors_and_garbage_cost_their_turn_only() -> None:
    def broken(obs: Any, role: str) -> Any:
        raise ValueError("boom")

    async def garbage(obs: Any, role: str) -> Any:
        return "not an action"

    policies = instant_policies()
    policies["a"] = broken
    policies["b"] = garbage
    env = ToyEnv(steps=8)
    with captured_events() as events:
        trace = await run_episode(env, policies=policies, **run_kwargs())
    assert trace.status == "ok" and len(trace.turns) == 8
    a, b, c, _ = trace.turns[:4]
    assert a.error == "ValueError: boom" and a.action == noop("a")
    assert b.error is not None and b.error.startswith("TypeError: ") and b.action == noop("b")
    assert "not an action" in b.error
    assert c.error is None and c.action == act("c")
    assert trace.errors == 4
    errors = [e for e in events if e["event"] == "policy_error"]
    assert len(errors) == 4
    assert errors[0]["role"] == "a" and errors[0]["turn"] == 0
    assert isinstance(errors[0]["exc_info"], ValueError)
    assert errors[0]["log_level"] == "error"
    turns = [e for e in events if e["event"] == "turn"]
    assert [t["error"] for t in turns[:2]] == [a.error, b.error]


@pytest.mark.parametrize("turn_timeout", [None, 5.0])
@pytest.mark.asyncio
async def test_a_policy_raising_cancelled_error_itself_costs_its_turn_only(
    turn_timeout: float | None,
) -> None:
    """A CancelledError from the policy's own code (it awaited a future someone
    else cancelled) is not a cancellation of the actor: that turn plays the
    fallback with the error, the role's later turns call the policy again, and
    the episode ends (it used to wait for the dead actor forever)."""
    import asyncio

    calls: list[int] = []

    async def flaky(obs: Any, role: str) -> Any:
        calls.append(obs.step)
        if len(calls) == 1:
            cancelled = asyncio.get_running_loop().create_future()
            cancelled.cancel()
            await cancelled
        return act(role)

    policies = instant_policies()
    policies["a"] = flaky
    with captured_events() as events, anyio.fail_after(10):
        trace = await run_episode(
            ToyEnv(steps=9), policies=policies, **run_kwargs(turn_timeout=turn_timeout)
        )
    assert trace.status == "ok" and len(trace.turns) == 9
    first, *later = [t for t in trace.turns if t.role == "a"]
    assert first.error == "CancelledError: " and first.action == noop("a")
    assert not first.timed_out and trace.errors == 1 and trace.timeouts == 0
    assert len(later) == 2 and all(t.error is None and t.action == act("a") for t in later)
    assert len(calls) == 3
    assert [e["turn"] for e in events if e["event"] == "policy_error"] == [0]


@pytest.mark.asyncio
async def test_timeouts_errors_and_late_replies_leave_no_cycles_for_the_collector(
    tmp_path: Path,
) -> None:
    # Everything an episode made is freed by reference counting when it ends,
    # also on its deadline and error paths (the state and its open actor
    # referred to each other; an actor's frame held its last exception, whose
    # traceback holds that frame). Batches freeze what survives a collection,
    # so a cycle left here would stay until the last batch ends.
    async def hung(obs: Any, role: str) -> Any:
        await anyio.sleep_forever()

    def broken(obs: Any, role: str) -> Any:
        raise ValueError("boom")

    late_returned = [0]
    both_late = anyio.Event()

    async def late(obs: Any, role: str) -> Any:
        with anyio.CancelScope(shield=True):
            await anyio.sleep(0.03)
        late_returned[0] += 1
        if late_returned[0] == 2:
            both_late.set()
        return act(role)

    policies = {"a": hung, "b": broken, "c": lambda obs, role: "garbage", "d": late}
    # b's and c's instant errors must come in time to be errors: a deadline a
    # loaded machine's scheduler cannot miss (10 ms it can)
    deadlines = {"a": 0.01, "b": 5.0, "c": 5.0, "d": 0.01}
    log = tmp_path / "run.jsonl"
    configure_logging(log)  # the errors are logged (configuring makes cycles of its own)
    gc.collect()
    gc.disable()
    try:
        trace = await run_episode(ToyEnv(steps=8), policies=policies,
                                  **run_kwargs(turn_timeout=deadlines))  # fmt: skip
        with anyio.fail_after(10):  # d's two late replies came back (and were dropped)
            await both_late.wait()
        assert trace.timeouts == 4 and trace.errors == 4
        del trace
        gc.set_debug(gc.DEBUG_SAVEALL)
        found = gc.collect()
        kinds = sorted({type(o).__name__ for o in gc.garbage})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
        disable_logging()
    assert found == 0, kinds
    events = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    assert "late_reply_dropped" in events and "policy_error" in events


@pytest.mark.parametrize("env", [ToyEnv(fail_reset=True), ToyEnv(steps=8, fail_step=5)])
@pytest.mark.asyncio
async def test_environment_failure_ends_the_episode(env: ToyEnv) -> None:
    trace = await run_episode(env, policies=instant_policies(), **run_kwargs())
    assert trace.status == "failed"
    assert trace.error is not None and "broke" in trace.error
    assert len(trace.turns) == (env.fail_step or 0)


@pytest.mark.parametrize("policy", ["hangs", "raises"])
@pytest.mark.asyncio
async def test_a_turn_whose_step_failed_is_not_counted(policy: str) -> None:
    # Timed out (or raised), then env.step failed on the fallback: no step was
    # applied, so neither the trace nor episode_finished counts the turn.
    async def hangs(obs: Any, role: str) -> Any:
        await anyio.sleep_forever()

    def raises(obs: Any, role: str) -> Any:
        raise ValueError("policy broke")

    policies = instant_policies()
    policies["a"] = hangs if policy == "hangs" else raises
    with captured_events() as events:
        trace = await run_episode(ToyEnv(steps=8, fail_step=0), policies=policies,
                                  **run_kwargs(turn_timeout=0.02))  # fmt: skip
    assert trace.status == "failed" and trace.turns == []
    assert (trace.timeouts, trace.errors) == (0, 0)
    [finished] = [e for e in events if e["event"] == "episode_finished"]
    assert (finished["timeouts"], finished["errors"]) == (0, 0)


class _Ambiguous:
    """A ``done`` whose truth cannot be taken (as a numpy array's)."""

    def __bool__(self) -> bool:
        raise ValueError("ambiguous")


class _BadObservations(ToyEnv):
    """``what`` comes back from reset (at ``at`` None) or from the step ``at``."""

    def __init__(self, what: Any, at: int | None) -> None:
        super().__init__(steps=8)
        self.what, self.at = what, at

    def reset(self, **kwargs: Any) -> Any:
        obs = super().reset(**kwargs)
        return self.what if self.at is None else obs

    def step(self, action: Any) -> Any:
        obs = super().step(action)
        return self.what if self.n == self.at else obs


@pytest.mark.parametrize(
    ("env", "turns", "message"),
    [
        (_BadObservations(None, None), 0,
         "AttributeError: 'NoneType' object has no attribute 'done' "
         "(in the observation env.reset returned)"),
        (_BadObservations(None, 3), 2, "(in the observation env.step returned)"),
        (_BadObservations(type("NoRole", (), {"done": False, "reward": 0.0})(), 2), 2,
         "AttributeError: 'NoRole' object has no attribute 'turn_role' "
         "(in the observation env.step returned)"),
        (_BadObservations(type("NoReward", (), {"done": False, "turn_role": "b"})(), 2), 1,
         "AttributeError: 'NoReward' object has no attribute 'reward' "
         "(in the observation env.step returned)"),
        (_BadObservations(Obs(["a"], False, 0.0, 1), 1), 1,  # type: ignore[arg-type]
         "TypeError: unhashable type: 'list' (in the observation env.step returned)"),
        (_BadObservations(Obs("zed", False, 0.0, 1), 1), 1,
         "ValueError: turn_role 'zed' is not a role of the environment's turn_order "
         "(in the observation env.step returned)"),
        (_BadObservations(Obs("b", _Ambiguous(), 0.0, 1), 1), 0,  # type: ignore[arg-type]
         "ValueError: ambiguous (in the observation env.step returned)"),
    ],
)  # fmt: skip
@pytest.mark.asyncio
async def test_what_is_not_an_observation_fails_the_episode(
    env: ToyEnv, turns: int, message: str
) -> None:
    # An environment that returns no observation fails its episode like one
    # that raises (a batch goes on), with the error saying where it came from.
    with captured_events() as events:
        trace = await run_episode(env, policies=instant_policies(), **run_kwargs())
    assert trace.status == "failed" and message in trace.error
    assert len(trace.turns) == turns
    [finished] = [e for e in events if e["event"] == "episode_finished"]
    assert finished["status"] == "failed" and finished["error"] == trace.error


@pytest.mark.asyncio
async def test_an_abandoned_in_thread_call_keeps_its_own_turn() -> None:
    # Role a's call for turn 0 overruns its deadline and runs on in its thread
    # while a plays turn 4; what it then reads and annotates is turn 0's, and
    # never lands in turn 4's record.
    import threading

    second_call, first_done = threading.Event(), threading.Event()
    seen: list[int] = []

    def blocking(obs: Any, role: str) -> Any:
        if not second_call.is_set() and not seen:
            seen.append(-1)
            second_call.wait(5)  # turn 4's call is running now
            ctx = current_turn()
            seen[0] = ctx.turn
            ctx.annotate(made_for=ctx.turn)
            first_done.set()
        else:
            second_call.set()
            first_done.wait(5)
            current_turn().annotate(answered=True)
        return act(role)

    policies = instant_policies()
    policies["a"] = in_thread(blocking)
    trace = await run_episode(ToyEnv(steps=5), policies=policies,
                              **run_kwargs(turn_timeout={"a": 0.05}))  # fmt: skip
    assert seen == [0]
    assert trace.turns[0].timed_out and trace.turns[0].info == {}
    assert not trace.turns[4].timed_out and trace.turns[4].info == {"answered": True}


@pytest.mark.asyncio
async def test_current_turn_and_annotations() -> None:
    seen: list[Any] = []

    async def policy(obs: Any, role: str) -> Any:
        ctx = current_turn()
        seen.append((ctx.episode_id, ctx.turn, ctx.role, ctx.deadline is not None))
        ctx.annotate(usage={"tokens": ctx.turn})
        ctx.annotate(completion="ok")
        return act(role)

    policies = instant_policies()
    policies["c"] = policy
    with captured_events() as events:
        trace = await run_episode(
            ToyEnv(steps=8), policies=policies,
            **run_kwargs(episode_id="ep-1", turn_timeout={"c": 5.0}),
        )  # fmt: skip
    assert seen == [("ep-1", 2, "c", True), ("ep-1", 6, "c", True)]
    assert trace.turns[2].info == {"usage": {"tokens": 2}, "completion": "ok"}
    assert trace.turns[0].info == {}
    turn2 = next(e for e in events if e["event"] == "turn" and e["turn"] == 2)
    # The log line carries the small, known fields only (see the next test).
    assert turn2["usage"] == {"tokens": 2} and "completion" not in turn2


@pytest.mark.asyncio
async def test_turn_event_logs_only_small_known_annotations() -> None:
    async def policy(obs: Any, role: str) -> Any:
        current_turn().annotate(
            prompt=[{"role": "user", "content": "x" * 2000}],
            completion="y" * 2000,
            token_ids=list(range(100)),
            usage={"prompt_tokens": 700, "completion_tokens": 12},
            attempts=2,
            model="m",
            latency_ms=12.5,
            parse_error="z" * 1000,
            custom="not on the allow-list",
        )
        return act(role)

    policies = instant_policies()
    policies["a"] = policy
    with captured_events() as events:
        trace = await run_episode(ToyEnv(steps=1), policies=policies, **run_kwargs())
    assert len(trace.turns[0].info["completion"]) == 2000  # the record keeps everything
    (turn,) = [e for e in events if e["event"] == "turn"]
    assert turn["usage"] == {"prompt_tokens": 700, "completion_tokens": 12}
    assert turn["attempts"] == 2 and turn["model"] == "m"
    assert turn["policy_latency_ms"] == 12.5 and turn["latency_ms"] != 12.5
    assert turn["parse_error"].startswith("zzz") and len(turn["parse_error"]) <= 203
    assert not {"prompt", "completion", "token_ids", "custom"} & turn.keys()


@pytest.mark.asyncio
async def test_timed_out_turn_keeps_the_annotations_made_before_its_deadline() -> None:
    async def slow(obs: Any, role: str) -> Any:
        current_turn().annotate(prompt="the prompt")
        await anyio.sleep_forever()

    annotated_late = threading.Event()

    def blocking(obs: Any, role: str) -> Any:
        import time

        ctx = current_turn()
        ctx.annotate(prompt="threaded")
        time.sleep(0.15)
        ctx.annotate(completion="too late")  # after the deadline: dropped
        annotated_late.set()
        return act(role)

    policies = instant_policies()
    policies["a"] = slow
    policies["b"] = in_thread(blocking)
    with anyio.fail_after(5):
        trace = await run_episode(
            ToyEnv(steps=4), policies=policies, **run_kwargs(turn_timeout={"a": 0.05, "b": 0.05})
        )
    a, b = trace.turns[:2]
    assert a.timed_out and a.info == {"prompt": "the prompt"}
    assert b.timed_out and b.info == {"prompt": "threaded"}
    # the abandoned thread annotates after its deadline (waited for: a fixed
    # 0.2 s could pass first on a loaded machine, and prove nothing)
    assert await anyio.to_thread.run_sync(annotated_late.wait, 10)
    assert b.info == {"prompt": "threaded"}


@pytest.mark.asyncio
async def test_current_turn_outside_a_policy_raises() -> None:
    with pytest.raises(RuntimeError, match="inside a policy"):
        current_turn()


@pytest.mark.asyncio
async def test_episode_events_and_fields() -> None:
    with captured_events() as events:
        trace = await run_episode(
            ToyEnv(steps=4),
            policies=instant_policies(),
            **run_kwargs(
                episode_id="ep-2",
                log_fields={"seed": 7},
                describe_turn=lambda rec: {
                    "step": rec.next_observation.step,
                    "action_type": rec.action[0],
                },
                describe_finish=lambda env, tr: {"final_step": len(tr.turns)},
            ),
        )
    names = [e["event"] for e in events]
    assert names == ["episode_started"] + ["turn"] * 4 + ["episode_finished"]
    assert events[0]["seed"] == 7 and events[0]["episode_id"] == "ep-2"
    turn = events[1]
    assert {k: turn[k] for k in ("episode_id", "turn", "role", "step", "action_type")} == {
        "episode_id": "ep-2", "turn": 0, "role": "a", "step": 1, "action_type": "act",
    }  # fmt: skip
    assert turn["reward"] == 1.0 and turn["done"] is False and turn["timed_out"] is False
    assert turn["error"] is None and turn["latency_ms"] >= 0
    fin = events[-1]
    assert (
        fin["status"] == "ok"
        and fin["final_step"] == 4
        and fin["wall_s"] == pytest.approx(trace.wall_s, abs=1e-5)
    )
    assert fin["timeouts"] == 0 and fin["errors"] == 0


@pytest.mark.parametrize("turn_timeout", [None, 5.0])
@pytest.mark.asyncio
async def test_cancelling_an_episode_cancels_its_calls_and_honours_their_shields(
    turn_timeout: float | None,
) -> None:
    cleaned: list[str] = []

    async def policy(obs: Any, role: str) -> Any:
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.05)  # cleanup that awaits
                cleaned.append(role)

    with anyio.fail_after(5):
        with anyio.move_on_after(0.05) as scope:
            await run_episode(
                ToyEnv(), policies={"a": policy}, **run_kwargs(turn_timeout=turn_timeout)
            )
    assert scope.cancelled_caught
    assert cleaned == ["a"]


async def _blocking(obs: Any, role: str) -> Any:
    return act(role)


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        ({"policies": {"a": "oops"}}, TypeError,
         r"^the policy for role 'a' is 'oops', not a callable"),
        ({"policies": [("a", act)]}, TypeError, r"^policies must be a mapping role -> policy"),
        ({"fallback": None}, TypeError, r"^fallback must be a callable role -> action, got None$"),
        ({"turn_timeout": {"z": 1}}, ValueError,
         r"^turn_timeout names 'z', which is not a role of the episode; "
         r"roles: 'a', 'b', 'c', 'd'$"),
    ],
)  # fmt: skip
@pytest.mark.asyncio
async def test_arguments_that_would_fail_mid_episode_are_refused_first(
    overrides: dict[str, Any], error: type[Exception], message: str
) -> None:
    kwargs = {"policies": instant_policies(), **run_kwargs()}
    kwargs.update(overrides)
    with captured_events() as events, pytest.raises(error, match=message):
        await run_episode(ToyEnv(fail_reset=True), **kwargs)
    assert events == []


def test_in_thread_takes_a_blocking_callable() -> None:
    with pytest.raises(TypeError, match=r"^in_thread\(\) takes a blocking policy"):
        in_thread(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="is async: use it as a policy as it is"):
        in_thread(_blocking)


@pytest.mark.parametrize("callback", ["after_step", "is_action", "fallback", "describe_turn"])
@pytest.mark.asyncio
async def test_a_callback_error_is_raised_as_itself_and_the_episode_logged_as_ended(
    callback: str,
) -> None:
    def broken(*args: Any) -> Any:
        raise ZeroDivisionError("callback broke")

    policies = instant_policies()
    if callback == "fallback":
        del policies["b"]  # b plays the fallback
    kwargs = {**run_kwargs(), callback: broken}
    with captured_events() as events, pytest.raises(ZeroDivisionError, match="callback broke"):
        await run_episode(ToyEnv(), policies=policies, **kwargs)
    (finished,) = [e for e in events if e["event"] == "episode_finished"]
    assert finished["status"] == "error"
    assert finished["error"] == "ZeroDivisionError: callback broke"


@pytest.mark.asyncio
async def test_a_cancelled_episode_is_logged_as_ended() -> None:
    async def hang(obs: Any, role: str) -> Any:
        await anyio.sleep_forever()

    with captured_events() as events:
        with anyio.move_on_after(0.05):
            await run_episode(ToyEnv(), policies={"a": hang}, **run_kwargs())
    (finished,) = [e for e in events if e["event"] == "episode_finished"]
    assert finished["status"] == "cancelled" and finished["error"] is None


@pytest.mark.asyncio
async def test_each_actor_starts_at_its_roles_first_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    # An episode's first request goes out with one actor task started, not one
    # per role; each other role's starts at its first turn; a role that never
    # plays has none.
    from actors._actor import Actor

    started: list[str] = []
    seen_at_call: list[tuple[str, int]] = []
    real_run = Actor.run

    async def counting_run(self: Actor) -> None:
        started.append(self.role)
        await real_run(self)

    monkeypatch.setattr(Actor, "run", counting_run)

    def policy(observation: Any, role: str) -> Any:
        seen_at_call.append((role, len(started)))
        return act(role)

    policies = dict.fromkeys(ROLES, policy)
    trace = await run_episode(ToyEnv(steps=9), policies=policies, **run_kwargs(max_turns=2))
    assert [t.role for t in trace.turns] == ["a", "b"]
    assert started == ["a", "b"]  # c and d never played: no task
    assert seen_at_call == [("a", 1), ("b", 2)]
    started.clear()
    trace = await run_episode(ToyEnv(steps=9), policies=policies, **run_kwargs())
    assert len(trace.turns) == 9 and started == list(ROLES)
