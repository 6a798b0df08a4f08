"""``actors.run``: synchronous entry on asyncio, uvloop when installed, ACTORS_LOOP picks."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest
from actors_toy import ToyEnv, instant_policies, run_kwargs

import actors
from actors import resolve_loop
from tests._needs import needs

HAS_UVLOOP = importlib.util.find_spec("uvloop") is not None


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


async def _play() -> list[tuple[int, str]]:
    trace = await actors.run_episode(ToyEnv(steps=9), policies=instant_policies(), **run_kwargs())
    return [(t.turn, t.role) for t in trace.turns]


def test_standard_loop_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACTORS_LOOP", raising=False)
    assert actors.run(_loop_module, loop="asyncio").startswith("asyncio")
    monkeypatch.setenv("ACTORS_LOOP", "asyncio")
    assert resolve_loop() == "asyncio"
    assert actors.run(_loop_module).startswith("asyncio")


def test_uvloop_by_default_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    needs(HAS_UVLOOP, "uvloop", "pip install -e . (a dependency off Windows)")
    monkeypatch.delenv("ACTORS_LOOP", raising=False)
    assert resolve_loop() == "uvloop"
    assert actors.run(_loop_module).startswith("uvloop")
    # the same episode, turn for turn, on either loop
    assert actors.run(_play) == actors.run(_play, loop="asyncio")


def test_bad_loop_names_the_value_and_what_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=r"loop must be one of auto, asyncio, uvloop, got 'trio'"):
        actors.run(_loop_module, loop="trio")
    monkeypatch.setenv("ACTORS_LOOP", "fast")
    with pytest.raises(ValueError, match=r"ACTORS_LOOP must be one of .*got 'fast'"):
        actors.run(_loop_module)


def test_uvloop_requested_but_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("actors._run._uvloop_installed", lambda: False)
    assert resolve_loop("auto") == "asyncio"
    with pytest.raises(ValueError, match="uvloop is not installed"):
        resolve_loop("uvloop")


class _CountsRepr:
    calls = 0

    def __repr__(self) -> str:
        type(self).calls += 1
        return "_CountsRepr()"


async def _many_results() -> list[_CountsRepr]:
    return [_CountsRepr() for _ in range(10)]


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_the_value_is_returned_without_its_repr(loop: str) -> None:
    # asyncio's runner, closing, builds the repr of its main task, result
    # included (the first six items of a list, four times): a batch's results
    # rendered in full for nothing. actors.run keeps the value out of the task.
    if loop == "uvloop":
        needs(HAS_UVLOOP, "uvloop", "pip install -e . (a dependency off Windows)")
    _CountsRepr.calls = 0
    results = actors.run(_many_results, loop=loop)
    assert len(results) == 10 and all(type(r) is _CountsRepr for r in results)
    assert _CountsRepr.calls == 0
