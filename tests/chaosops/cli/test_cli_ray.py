"""``--ray``: the same run on Ray worker actors, with the same outputs and
guarantees. Ray starts with each command (``--ray local``: on 127.0.0.1 only,
stopped after) or with the test (a cluster of several nodes on this machine)."""

from __future__ import annotations

import contextlib
import datetime
import functools
import importlib
import importlib.util
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from actors.cluster import REPLACE_S

from ..._needs import needs
from ..._ray import RAY_TIMEOUT, one_ray_instance
from ._cli import assert_one_error_line, chaosops, interrupt, jsonl, spawn

# before Ray is imported (it reads it then): this test's own Ray nodes on 127.0.0.1
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
needs(importlib.util.find_spec("ray"), "Ray", "pip install -e '.[test]' (or the 'ray' extra)")
needs(importlib.util.find_spec("psutil"), "psutil", "pip install -e '.[test]'")
ray = importlib.import_module("ray")
psutil = importlib.import_module("psutil")

TIMEOUT = RAY_TIMEOUT  # every wait of this module is bounded by it
pytestmark = pytest.mark.timeout(4 * TIMEOUT)  # a test runs up to three such commands


@pytest.fixture(scope="module", autouse=True)
def _alone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with one_ray_instance(tmp_path_factory):
        yield


SLOW_POLICY = '''\
import anyio
from chaosops.agents.policies import heuristic_policy
from chaosops.env.models import AgentRole

def factory(scenario):
    """The heuristic policy, 50 ms a turn: a run lasts long enough to be hurt."""
    inner = heuristic_policy(seed=scenario.seed)

    async def policy(observation, role):
        await anyio.sleep(0.05)
        return inner(observation, role)

    return dict.fromkeys(AgentRole, policy)
'''
SLOW = ("--policy", "slowpolicy:factory", "--no-progress", "--concurrency", "4")


@pytest.fixture(scope="module")
def slow(work: Path) -> Path:
    (work / "slowpolicy.py").write_text(SLOW_POLICY)
    return work


def outcomes(folder: Path) -> dict[str, tuple[float, list[Any]]]:
    """Each episode's reward and applied actions, by run key; fails on a repeated key."""
    records = jsonl(folder / "results.jsonl")
    keys = [r["run_key"] for r in records]
    assert len(keys) == len(set(keys)), "an episode recorded twice"
    return {r["run_key"]: (r["cumulative_reward"], [s["action"] for s in r["steps"]])
            for r in records}  # fmt: skip


def until_results(folder: Path, count: int, proc: Any) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and proc.poll() is None:
        path = folder / "results.jsonl"
        if path.exists() and len(path.read_bytes().splitlines()) >= count:
            return
        time.sleep(0.1)
    raise AssertionError(f"{count} results not reached (exit {proc.poll()})")


TAG = "CHAOSOPS_TEST_PROCESSES"
"""An environment variable each test sets to a value of its own: every process
its commands start (Ray's head, raylet, workers) inherits it, also once
reparented, so the test finds its own processes and no one else's."""


@pytest.fixture(autouse=True)
def own_processes(monkeypatch: pytest.MonkeyPatch) -> str:
    tag = uuid.uuid4().hex
    monkeypatch.setenv(TAG, tag)
    return tag


def _ours() -> list[Any]:
    """This test's processes (see :data:`TAG`), this pytest process excluded."""
    tag, found = os.environ[TAG], []
    for process in psutil.process_iter():
        try:
            if process.pid != os.getpid() and process.environ().get(TAG) == tag:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _named(processes: list[Any], word: str) -> list[Any]:
    named = []
    for process in processes:
        try:
            if any(word in part for part in process.cmdline()):
                named.append(process)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return named


def ray_workers() -> list[Any]:
    """This test's Ray worker actors."""
    return _named(_ours(), "ray::JobWorker")


@pytest.fixture(scope="module")
def local_run(slow: Path) -> Path:
    out = slow / "local"
    proc = chaosops("run", *SLOW, "--out", out, cwd=slow, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    return out


def test_a_ray_run_equals_a_local_one_and_logs_each_worker(
    slow: Path, local_run: Path, canonical_size: int
) -> None:
    out = slow / "on-ray"
    proc = chaosops("run", *SLOW, "--ray", "local", "--workers", "2", "--out", out, cwd=slow,
                    timeout=TIMEOUT)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert outcomes(out) == outcomes(local_run) and len(outcomes(out)) == canonical_size
    # the workers made the trajectory lines: the same as the local run's
    steps = lambda folder: {  # noqa: E731
        (t["run_key"], t["step"]): (t["prompt"], t["completion"], t["action"], t["reward"])
        for t in jsonl(folder / "trajectories.jsonl")
    }
    assert steps(out) == steps(local_run)
    turns = [e for e in jsonl(out / "log.jsonl") if e["event"] == "turn"]
    assert {e["worker"] for e in turns} == {0, 1}  # one log stream, naming its worker
    run_id = {e["run_id"] for e in jsonl(out / "log.jsonl")}
    assert len(run_id) == 1  # the workers' lines carry the run's id
    assert not _ours()  # nothing of this run's Ray left running


def test_a_killed_worker_s_episodes_run_on_the_others(slow: Path, local_run: Path) -> None:
    out = slow / "worker-killed"
    proc = spawn("run", *SLOW, "--ray", "local", "--workers", "2", "--out", out, cwd=slow)
    try:
        until_results(out, 5, proc)
        victims = ray_workers()
        assert len(victims) == 2
        victims[0].send_signal(signal.SIGKILL)
        _, stderr = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            interrupt(proc, TIMEOUT)
    assert proc.returncode == 0, stderr
    assert outcomes(out) == outcomes(local_run)  # none lost, none twice, the same play
    # a worker was started in its place, as worker 2: it came up, or (slower than
    # REPLACE_S, on a loaded machine) it was given up and the log says so
    events = jsonl(out / "log.jsonl")
    [replaced] = [e for e in events if e["event"] in ("worker_replaced", "worker_not_replaced")]
    assert replaced["worker"] == 2, replaced


def test_a_ray_run_killed_midway_resumes(slow: Path, local_run: Path, canonical_size: int) -> None:
    out = slow / "driver-killed"
    proc = spawn("run", *SLOW, "--ray", "local", "--workers", "2", "--out", out, cwd=slow)
    try:
        until_results(out, 10, proc)
    finally:
        proc.send_signal(signal.SIGKILL)  # also when the wait failed: reaped, never left running
        proc.communicate(timeout=TIMEOUT)
        _reap_ray_left_by_a_killed_driver()
    done = len(jsonl(out / "results.jsonl"))
    assert 10 <= done < canonical_size
    resumed = chaosops("run", "--resume", "--out", out, "--ray", "local", cwd=slow, timeout=TIMEOUT)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{done} of {canonical_size} episodes already done" in resumed.stderr
    assert outcomes(out) == outcomes(local_run)
    # and a local resume of a Ray run's folder finds it complete
    again = chaosops("run", "--resume", "--out", out, cwd=slow, timeout=TIMEOUT)
    assert (
        again.returncode == 0
        and f"{canonical_size} of {canonical_size} episodes already done" in again.stderr
    )


def _reap_ray_left_by_a_killed_driver() -> None:
    """A SIGKILLed driver cannot stop its local Ray: its reaper stops the head,
    and processes may linger. This test's own go, and no one else's."""
    for process in _ours():
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(_ours(), timeout=30)


def test_ctrl_c_stops_the_run_and_its_workers(slow: Path) -> None:
    out = slow / "interrupted"
    proc = spawn("run", *SLOW, "--ray", "local", "--workers", "2", "--out", out, cwd=slow)
    try:
        until_results(out, 3, proc)
    finally:
        stderr = interrupt(proc, TIMEOUT)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    # the command's exit stopped its Ray: none of this test's processes is left
    assert not _ours(), [p.cmdline() for p in _ours()]


def test_the_driver_s_metrics_count_every_worker(slow: Path, canonical_size: int) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    out = slow / "metered"
    proc = spawn("run", "--policy", "heuristic", "--no-progress", "--ray", "local",
                 "--workers", "2", "--metrics-port", "0", "--metrics-linger", "60",
                 "--out", out, cwd=slow)  # fmt: skip
    try:
        assert proc.stderr is not None
        url = proc.stderr.readline().rsplit(" ", 1)[1].strip()
        while "serving the final metrics" not in proc.stderr.readline():
            assert proc.poll() is None
        import urllib.request

        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
    finally:
        interrupt(proc, TIMEOUT)
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
    steps = sum(len(r["steps"]) for r in jsonl(out / "results.jsonl"))
    assert sums["chaosops_episodes_finished_total"] == canonical_size
    assert sums["chaosops_turns_total"] == steps


@pytest.fixture
def cluster() -> Iterator[Any]:
    """A Ray cluster of three nodes on this machine (a head without CPUs, two of one CPU)."""
    from ray.cluster_utils import Cluster

    made = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    nodes = [made.add_node(num_cpus=1) for _ in range(2)]
    made.wait_for_nodes()
    try:
        yield made, nodes
    finally:
        made.shutdown()


def test_a_lost_node_s_episodes_run_on_the_others(
    slow: Path, local_run: Path, cluster: tuple[Any, list[Any]]
) -> None:
    made, nodes = cluster
    assert made.address.startswith("127.0.0.1:")
    out = slow / "node-lost"
    proc = spawn("run", *SLOW, "--ray", made.address, "--out", out, cwd=slow)
    try:
        until_results(out, 5, proc)
        made.remove_node(nodes[0])
        _, stderr = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            interrupt(proc, TIMEOUT)
    assert proc.returncode == 0, stderr
    assert outcomes(out) == outcomes(local_run)
    # The cluster had no room for a replacement: the run ends once the other
    # worker has played every episode, without waiting out the replacement's
    # time (measured on the run's own log, whatever the machine's load).
    events = jsonl(out / "log.jsonl")
    [ended] = [_when(e) for e in events if e["event"] == "run_finished"]
    last = max(_when(e) for e in events if e["event"] == "episode_finished")
    assert ended - last < REPLACE_S / 2, (last, ended)


def _when(event: dict[str, Any]) -> float:
    return datetime.datetime.fromisoformat(event["timestamp"]).timestamp()


def test_a_bad_address_and_a_missing_extra_are_one_line(slow: Path, tmp_path: Path) -> None:
    nowhere = slow / "nowhere"
    proc = chaosops("run", "--ray", "127.0.0.1:1", "--out", nowhere, cwd=slow, timeout=TIMEOUT)
    assert_one_error_line(proc, "cannot reach the Ray cluster at 127.0.0.1:1",
                          "ray start --head", "or --ray local")  # fmt: skip
    assert proc.returncode == 1 and not (slow / "nowhere").exists()
    proc = chaosops("run", "--ray", "somewhere", "--out", nowhere, cwd=slow, timeout=TIMEOUT)
    assert_one_error_line(proc, "'somewhere'", "local, auto or HOST:PORT")
    proc = chaosops("run", "--workers", "2", "--out", slow / "nowhere", cwd=slow, timeout=TIMEOUT)
    assert_one_error_line(proc, "--workers needs --ray")
    # a Python where Ray cannot be imported
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "__init__.py").write_text("raise ImportError('no ray here')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    import subprocess

    missing = subprocess.run(
        [sys.executable, "-m", "chaosops.cli", "run", "--ray", "local", "--out", slow / "nowhere"],
        capture_output=True, text=True, cwd=slow, env=env, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    assert_one_error_line(missing, "the 'ray' extra", "pip install")
    assert missing.returncode == 2 and not (slow / "nowhere").exists()


def test_the_python_batch_api_takes_the_same_options() -> None:
    """The batch API on Ray plays what it plays here, a custom environment
    factory included (here: the roles in another turn order)."""
    from chaosops.agents import runner
    from chaosops.curriculum.generator import scenarios_for_tier
    from chaosops.env.environment import ChaosOpsEnvironment
    from chaosops.runs import policy_factory
    from chaosops.runs import workers as cluster

    scenarios = scenarios_for_tier("medium", episodes_per_type=2)
    other_order = functools.partial(ChaosOpsEnvironment, ("dev", "manager", "sre", "oversight"))
    here = runner.run_batch(scenarios, policy_factory("heuristic"), concurrency=4,
                            env_factory=other_order)  # fmt: skip
    there = cluster.run_batch(scenarios, policy_factory("heuristic"), concurrency=4,
                              env_factory=other_order,
                              cluster=cluster.ClusterOptions("local", workers=2))  # fmt: skip

    def played(results: list[Any]) -> list[Any]:
        return [(r.scenario, r.cumulative_reward, [s.action for s in r.steps]) for r in results]

    assert played(there) == played(here)
    assert {r.steps[0].role.value for r in there} == {"dev"}  # the factory's order
    assert not ray.is_initialized()  # connected for the batch only


def test_llm_policies_are_built_in_the_workers_within_one_in_flight_limit(slow: Path) -> None:
    import json
    import urllib.request

    from ._cli import mock_process

    out = slow / "llm-on-ray"
    with mock_process(slow, "--latency", "60ms") as url:
        proc = chaosops("run", "--policy", "llm", "--llm-base-url", url, "--tier", "easy",
                        "--episodes-per-type", "3", "--concurrency", "16",
                        "--llm-max-in-flight", "4", "--no-progress", "--ray", "local",
                        "--workers", "2", "--out", out, cwd=slow, timeout=TIMEOUT)  # fmt: skip
        with urllib.request.urlopen(url.removesuffix("/v1") + "/stats", timeout=5) as answer:
            stats = json.loads(answer.read())
    assert proc.returncode == 0, proc.stderr
    records = jsonl(out / "results.jsonl")
    assert len(records) == 12 and stats["requests"] >= 12
    assert 2 <= stats["peak_in_flight"] <= 4  # 2 a worker: the limit holds across the cluster
    models = {r["roles"]["sre"]["model"] for r in records}
    assert models == {"chaosops-mock"}


def test_spans_are_exported_from_the_workers(slow: Path) -> None:
    from .otlp_collector import Collector, attributes

    collector = Collector()
    out = slow / "traced-on-ray"
    try:
        proc = chaosops("run", "--policy", "heuristic", "--tier", "hard", "--no-progress",
                        "--ray", "local", "--workers", "2", "--otlp-endpoint", collector.url,
                        "--out", out, cwd=slow, timeout=TIMEOUT)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        records = jsonl(out / "results.jsonl")
        episodes = [attributes(s) for s in collector.spans if s.name == "episode"]
        turns = [s for s in collector.spans if s.name == "turn"]
    finally:
        collector.close()
    assert sorted(e["episode.id"] for e in episodes) == sorted(r["episode_id"] for r in records)
    assert len(turns) == sum(len(r["steps"]) for r in records)


def test_an_endpoint_that_keeps_failing_stops_a_ray_run(slow: Path) -> None:
    from ._cli import mock_process

    out = slow / "llm-failing-on-ray"
    with mock_process(slow, "--rate-500", "1") as url:
        proc = chaosops("run", "--policy", "llm", "--llm-base-url", url, "--tier", "easy",
                        "--episodes-per-type", "5", "--llm-retries", "0", "--llm-max-failures",
                        "3", "--no-progress", "--ray", "local", "--workers", "2",
                        "--out", out, cwd=slow, timeout=TIMEOUT)  # fmt: skip
    assert_one_error_line(proc, "model turns in a row failed on the Ray workers", "HTTP 500",
                          "--model-max-failures 3", "--resume")  # fmt: skip
    assert proc.returncode == 1
    # what finished while every call failed is not kept: --resume plays it again
    assert not [r for r in jsonl(out / "results.jsonl") if r["errors"]]


def test_the_progress_bar_counts_every_worker() -> None:
    import anyio

    from actors.cluster import connect
    from chaosops.cli._progress import ProgressBar
    from chaosops.curriculum.generator import scenarios_for_tier
    from chaosops.runs import policy_factory
    from chaosops.runs.workers import ClusterOptions, EpisodeJob, open_cluster_batch

    scenarios = scenarios_for_tier("hard", episodes_per_type=4)
    bar = ProgressBar(enabled=False, total=len(scenarios), label="ray")
    seen: list[int] = []  # what the bar shows, read as a display would, while the batch runs

    async def sample(done: anyio.Event) -> None:
        while not done.is_set():
            seen.append(bar.in_flight)
            await anyio.sleep(0.005)

    async def play() -> None:
        job = EpisodeJob(functools.partial(policy_factory, "heuristic"))
        done = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sample, done)
            async with open_cluster_batch(scenarios, job, ClusterOptions("local", 2),
                                          concurrency=8) as results:  # fmt: skip
                bar.watch(results)
                async for _, result in results:
                    bar.advance(result)
            bar.watch(None)
            done.set()

    with connect("local"):
        anyio.run(play)
    assert bar.done == len(scenarios) and bar.in_flight == 0
    # both workers' episodes at once (4 slots each), never more than the concurrency
    assert max(seen) == 8


def test_a_run_whose_every_worker_died_stops_in_one_line(slow: Path, canonical_size: int) -> None:
    out = slow / "all-workers-killed"
    proc = spawn("run", *SLOW, "--ray", "local", "--workers", "1", "--out", out, cwd=slow)
    try:
        until_results(out, 3, proc)
        deadline = time.monotonic() + TIMEOUT
        while proc.poll() is None and time.monotonic() < deadline:  # it, then its replacement
            for worker in ray_workers():
                worker.send_signal(signal.SIGKILL)
            time.sleep(0.2)
        _, stderr = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            interrupt(proc, TIMEOUT)
    lines = stderr.strip().splitlines()
    assert proc.returncode == 1 and "Traceback" not in stderr, stderr
    assert lines[-1].startswith("chaosops: error: every Ray worker died;"), stderr
    done = jsonl(out / "results.jsonl")
    assert 3 <= len(done) < canonical_size  # what finished is kept for --resume


def test_an_eval_on_ray_equals_a_local_one(tmp_path: Path) -> None:
    """``chaosops eval --ray``: every policy's episodes played by the workers,
    with the same table and the same episodes as a local evaluation."""
    args = ("eval", "--policies", "heuristic,random", "--tier", "easy", "--no-progress",
            "--no-chart")  # fmt: skip
    tables = {}
    for name, extra in (("local", ()), ("ray", ("--ray", "local", "--workers", "2"))):
        out = tmp_path / name
        table = tmp_path / f"{name}.json"
        proc = chaosops(*args, *extra, "--out", out, "--json", table, cwd=tmp_path,
                        timeout=TIMEOUT)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        tables[name] = orjson.loads(table.read_bytes())
        for policy in ("heuristic", "random"):
            assert len(outcomes(out / policy)) == 20
    assert tables["ray"]["rows"] == tables["local"]["rows"]
    for policy in ("heuristic", "random"):
        assert outcomes(tmp_path / "ray" / policy) == outcomes(tmp_path / "local" / policy)
    assert not _ours()
