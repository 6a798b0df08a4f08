"""``--metrics-port``: Prometheus metrics served while a run goes, scraped by a
client over loopback, and by a real Prometheus server: the one installed, or
Debian's package fetched into pytest's cache (see :func:`_prometheus_binary`)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

import actors
from chaosops.agents.policies import heuristic_policy
from chaosops.agents.runner import run_batch
from chaosops.curriculum.generator import scenarios_for_tier
from chaosops.env.environment import DEFAULT_TURN_ORDER

from ..._needs import missing
from ._cli import (
    TIMEOUT,
    assert_one_error_line,
    chaosops,
    free_port,
    interrupt,
    jsonl,
    llm_run,
    spawn,
    stop,
)


def _scrape(url: str) -> dict[str, float]:
    """Sums of each sample name over its labels."""
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
    return sums


def _series(url: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample: (name, labels, value)."""
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return [
        (sample.name, sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def _lingering_series(
    *args: str | Path, cwd: Path
) -> tuple[subprocess.Popen[str], list[tuple[str, dict[str, str], float]], float]:
    """Run ``chaosops ARGS --metrics-port 0 --metrics-linger 60``, scrape its
    final metrics while it lingers, then Ctrl-C it: (the process, the series,
    the seconds the Ctrl-C took to end it)."""
    proc = spawn(*args, "--metrics-port", "0", "--metrics-linger", "60", cwd=cwd)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        url = first.rsplit(" ", 1)[1].strip()
        lines = [first]
        while "serving the final metrics" not in lines[-1]:
            lines.append(proc.stderr.readline())
            assert lines[-1], "".join(lines)
        series = _series(url)
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)  # lingering: a Ctrl-C ends it, and the command is done
        proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            interrupt(proc)
    return proc, series, time.monotonic() - start


def test_eval_lingers_with_its_final_counts_by_policy(work: Path) -> None:
    out = work / "metrics-eval"
    proc, series, took = _lingering_series(
        "eval", "tiny.toml", "--no-chart", "--no-progress", "--out", out, cwd=work
    )
    assert proc.returncode == 0
    assert took < 10
    assert (out / "eval.json").exists()

    def total(name: str, **labels: str) -> float:
        return sum(
            value for n, got, value in series
            if n == f"chaosops_{name}" and all(got.get(k) == v for k, v in labels.items())
        )  # fmt: skip

    for policy in ("random", "heuristic", "oracle"):
        assert total("episodes_planned_total", policy=policy) == 12
        assert total("episodes_finished_total", policy=policy, status="ok") == 12
        assert total("episodes_finished_total", policy=policy, status="failed") == 0
        assert total("episodes_scored_total", policy=policy) == 12
        assert total("episodes_in_flight", policy=policy) == 0
    assert total("episodes_scored_total", policy="oracle", resolved="true") == 12
    reward = [(labels, value) for name, labels, value in series
              if name == "chaosops_episode_reward_mean"]  # fmt: skip
    assert {labels["policy"] for labels, _ in reward} == {"random", "heuristic", "oracle"}
    # no *_created series beside the counters
    assert not [name for name, _, _ in series if name.endswith("_created")]


def test_metric_labels_name_the_role_policies_and_the_model(work: Path, mock_llm: str) -> None:
    proc, series, _ = _lingering_series(
        *llm_run(work, mock_llm, work / "metrics-roles", policy="heuristic"),
        "--role-policy", "dev=llm", cwd=work,
    )  # fmt: skip
    assert proc.returncode == 0
    planned = [labels for name, labels, _ in series if name == "chaosops_episodes_planned_total"]
    assert planned == [{"policy": "heuristic+dev=llm", "model": "chaosops-mock"}]
    turns = {labels["role"] for name, labels, _ in series
             if name == "chaosops_turns_total" and labels["model"] == "chaosops-mock"}  # fmt: skip
    assert "sre" in turns


def test_a_run_serves_its_metrics_while_it_goes(
    work: Path,
    mock_llm: str,
) -> None:
    out = work / "metrics-run"
    proc = spawn(*llm_run(work, mock_llm, out, "--metrics-port", "0"), cwd=work)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("chaosops: Prometheus metrics on http://127.0.0.1:"), line
        url = line.rsplit(" ", 1)[1].strip()
        deadline = time.monotonic() + TIMEOUT
        seen: dict[str, float] = {}
        while time.monotonic() < deadline and proc.poll() is None:
            seen = _scrape(url)
            if seen.get("chaosops_episodes_scored_total", 0) >= 1:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it was scraped mid-way"
        # mid-run: the plan, the episodes in flight, finished ones and their turns
        assert seen["chaosops_episodes_planned_total"] == 12
        assert 1 <= seen["chaosops_episodes_finished_total"] < 12
        assert seen["chaosops_episodes_in_flight"] <= 2  # --concurrency 2
        assert seen["chaosops_turns_total"] >= 1
        assert seen["chaosops_turn_latency_seconds_sum"] >= 0.08  # the mock's latency
        assert seen["chaosops_policy_tokens_total"] > 0
        assert seen["chaosops_episodes_scored_total"] >= 1
        labels = {tuple(sorted(lab.items())) for name, lab, _ in _series(url)
                  if name == "chaosops_turns_total"}  # fmt: skip
        assert labels and all(dict(lab)["policy"] == "llm" for lab in labels)
        # the process's own metrics come with the default registry
        assert seen["process_resident_memory_bytes"] > 0
        _, stderr = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            interrupt(proc)
    assert proc.returncode == 0, stderr
    assert len(jsonl(out / "results.jsonl")) == 12


def test_a_metrics_port_that_cannot_be_served_is_one_line_before_anything_is_written(
    work: Path,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = work / "metrics-taken"
        proc = chaosops("run", "--metrics-port", port, "--out", out, cwd=work)
    assert proc.returncode == 2
    assert_one_error_line(proc, "--metrics-port", f"127.0.0.1:{port}", "in use")
    assert not out.exists()
    proc = chaosops("run", "--metrics-port", "65536", "--out", out, cwd=work)
    assert_one_error_line(proc, "--metrics-port", "0 to 65535", "65536")
    proc = chaosops("run", "--metrics-host", "0.0.0.0", "--out", out, cwd=work)
    assert_one_error_line(proc, "--metrics-host needs --metrics-port")
    proc = chaosops("run", "--metrics-port", "0", "--metrics-host", "no.such.host.invalid",
                    "--out", out, cwd=work)  # fmt: skip
    assert_one_error_line(proc, "--metrics-host", "no.such.host.invalid")
    assert not out.exists()


# ------------------------------------------------- a real Prometheus server


@pytest.fixture
def prometheus(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, Path, int]]:
    """A Prometheus server's binary, config file (to fill in) and port: started by the test."""
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    binary, why = _prometheus_binary(
        cache.mkdir("prometheus") if cache is not None else tmp_path / "prometheus-package"
    )
    if binary is None:
        missing(f"a Prometheus server ({why})", "apt-get install prometheus")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    yield binary, tmp_path / "prometheus.yml", port


def _prometheus_binary(cache: Path) -> tuple[str | None, str]:
    """The ``prometheus`` on PATH; else Debian's package, unpacked without root
    into pytest's cache (``apt-get download`` and ``dpkg-deb -x``, as the test
    command installs the Python packages it needs). (None, why) where neither
    can be had: no Debian tools, no package registry, or
    ``CHAOSOPS_TEST_NO_DOWNLOAD`` set."""
    found = shutil.which("prometheus")
    unpacked = cache / "usr" / "bin" / "prometheus"
    if found is not None or unpacked.is_file():
        return found or str(unpacked), ""
    if os.environ.get("CHAOSOPS_TEST_NO_DOWNLOAD"):
        return None, "not installed, and CHAOSOPS_TEST_NO_DOWNLOAD is set"
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        return None, "not installed, and no apt-get/dpkg-deb to fetch Debian's package"
    with tempfile.TemporaryDirectory() as folder:
        try:
            got = subprocess.run(["apt-get", "download", "prometheus"], cwd=folder,
                                 capture_output=True, text=True, timeout=300)  # fmt: skip
            debs = sorted(Path(folder).glob("prometheus_*.deb"))
            if got.returncode != 0 or not debs:
                last = (got.stderr.strip().splitlines() or ["no package file"])[-1]
                return None, f"not installed, and apt-get download prometheus failed: {last}"
            subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(cache)],
                           check=True, capture_output=True, timeout=300)  # fmt: skip
        except (OSError, subprocess.SubprocessError) as exc:
            return None, f"not installed, and fetching Debian's package failed: {exc}"
    if not unpacked.is_file():
        return None, f"Debian's package has no usr/bin/prometheus (unpacked in {cache})"
    return str(unpacked), ""


def _query(port: int, expr: str) -> list[dict[str, object]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as response:
        body = json.loads(response.read())
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def test_a_real_prometheus_server_scrapes_the_metrics(
    tmp_path: Path, prometheus: tuple[Path, int]
) -> None:
    binary, config, port = prometheus
    registry = CollectorRegistry()
    with actors.configure_metrics(0, registry=registry, namespace="chaosops") as meter:
        scenarios = scenarios_for_tier("easy", episodes_per_type=2)
        results = run_batch(
            scenarios,
            lambda sc: dict.fromkeys(DEFAULT_TURN_ORDER, heuristic_policy(sc.seed)),
            concurrency=4,
        )
        turns = sum(len(r.steps) for r in results)
        config.write_text(
            "global:\n  scrape_interval: 1s\n"
            "scrape_configs:\n  - job_name: chaosops\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{meter.port}']\n"
        )
        server = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + TIMEOUT
            found: list[dict[str, object]] = []
            while time.monotonic() < deadline and not found:
                time.sleep(0.5)
                try:
                    found = _query(port, "sum(chaosops_turns_total)")
                except OSError:  # not listening yet
                    continue
            assert found, "Prometheus never scraped the metrics"
            assert float(found[0]["value"][1]) == turns  # type: ignore[index]
            up = _query(port, 'up{job="chaosops"}')
            assert float(up[0]["value"][1]) == 1  # type: ignore[index]
            resolved = _query(port, 'sum(chaosops_episodes_scored_total{resolved="true"})')
            assert float(resolved[0]["value"][1]) == sum(r.resolved for r in results)  # type: ignore[index]
        finally:
            stop(server)


def test_sigterm_ends_the_linger_and_keeps_the_exit_code(work: Path) -> None:
    out = work / "metrics-sigterm"
    proc = spawn("run", "tiny.toml", "--episodes-per-type", "1", "--metrics-port", "0",
                 "--metrics-linger", "60", "--no-progress", "--out", out, cwd=work)  # fmt: skip
    try:
        assert proc.stderr is not None
        lines = [proc.stderr.readline()]
        while "serving the final metrics" not in lines[-1]:
            lines.append(proc.stderr.readline())
            assert lines[-1], "".join(lines)
        proc.send_signal(signal.SIGTERM)  # systemd, Kubernetes: the run itself succeeded
        proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            interrupt(proc)
    assert proc.returncode == 0


def test_no_linger_when_the_command_failed_before_running(work: Path) -> None:
    start = time.monotonic()
    proc = chaosops("run", "tiny.toml", "--policy", "llm", "--llm-base-url",
                    f"http://127.0.0.1:{free_port()}/v1", "--metrics-port", "0",
                    "--metrics-linger", "30", "--no-progress", "--out", work / "metrics-nolinger",
                    cwd=work)  # fmt: skip
    assert proc.returncode == 1
    assert time.monotonic() - start < 20
    assert "serving the final metrics" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("chaosops: error: ")
