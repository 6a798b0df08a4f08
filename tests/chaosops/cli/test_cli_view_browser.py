"""``chaosops view`` through a real headless browser (Debian's chromium, driven
by playwright): what a person sees on the pages. Without chromium, skipped
with the reason on a developer's machine, failed in CI (``.ci/run`` installs it)."""

from __future__ import annotations

import importlib
import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ..._needs import needs
from ._cli import chaosops, jsonl, spawn, stop, written

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs(importlib.util.find_spec("playwright"), "playwright", "pip install -e '.[test]'")
needs(CHROMIUM, "chromium", "apt-get install chromium (.ci/run does)")
playwright_api = importlib.import_module("playwright.sync_api")


@pytest.fixture(scope="module")
def runs(work: Path) -> tuple[Path, Path]:
    """Two runs of the same 24 scenarios (20 easy, 4 medium): oracle, then heuristic."""
    folders = []
    for policy in ("oracle", "heuristic"):
        out = work / f"view-{policy}"
        proc = chaosops("run", "--policy", policy, "--limit", "24", "--no-progress",
                        "--out", out, cwd=work)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        folders.append(out)
    return folders[0], folders[1]


@pytest.fixture(scope="module")
def live(work: Path, runs: tuple[Path, Path]) -> Iterator[Path]:
    """A run folder being written: the oracle run's first 3 episodes so far, its
    results held locked as the run writing it holds them."""
    folder = work / "view-live"
    folder.mkdir()
    shutil.copy(runs[0] / "run.json", folder / "run.json")
    lines = (runs[0] / "results.jsonl").read_bytes().splitlines(keepends=True)
    (folder / "results.jsonl").write_bytes(b"".join(lines[:3]))
    with written(folder / "results.jsonl"):
        yield folder


@pytest.fixture(scope="module")
def viewer(work: Path, runs: tuple[Path, Path], live: Path) -> Iterator[str]:
    proc = spawn("view", runs[0], runs[1], live, "--port", "0", cwd=work)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "http://127.0.0.1:" in line, (line, proc.poll())
        yield line.split(" at ", 1)[1].split()[0].rstrip("/")
    finally:
        stop(proc)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    page = browser.new_page()
    page.set_default_timeout(10_000)
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    yield page
    page.close()
    # every script and style from the viewer itself: nothing fetched elsewhere
    assert all(url.startswith("http://127.0.0.1:") for url in requests), requests


def cells(page: Any, selector: str) -> list[list[str]]:
    return [
        [cell.inner_text() for cell in row.query_selector_all("td")]
        for row in page.query_selector_all(f"{selector} tbody tr")
    ]


def test_the_episode_list_of_a_small_run(page: Any, viewer: str, runs: tuple[Path, Path]) -> None:
    page.goto(viewer + "/")
    assert page.inner_text("h1") == "Runs"
    page.click("text=view-oracle")
    rows = cells(page, "table.episodes")
    records = jsonl(runs[0] / "results.jsonl")
    assert [r[0] for r in rows] == [r["episode_id"] for r in records]
    assert {r[4] for r in rows} == {"yes"}  # the oracle resolves every one
    assert page.query_selector("svg.chart rect") is not None  # reward by tier
    assert [row[:3] for row in cells(page, "#summary")] == [["oracle", "easy", "20"],
                                                          ["oracle", "medium", "4"]]  # fmt: skip


def test_one_episode_s_steps_in_order(page: Any, viewer: str, runs: tuple[Path, Path]) -> None:
    record = jsonl(runs[0] / "results.jsonl")[0]
    page.goto(viewer + "/run/0")
    page.click(f"text={record['episode_id']}")
    headings = [h.inner_text() for h in page.query_selector_all("li.step h3")]
    assert [h.split(" ")[:3] for h in headings] == [
        ["step", f"{n}:", s["role"]] for n, s in enumerate(record["steps"], start=1)
    ]
    assert "restart db" in page.inner_text("#step-3 .action")
    prompt = page.locator("#step-1 details")
    assert not prompt.locator("pre").first.is_visible()  # folded until asked
    prompt.locator("summary").click()
    assert "You are the **SRE**" in prompt.locator("pre").first.inner_text()
    page.click("#others >> text=view-heuristic")  # the same scenario in the other run
    assert page.inner_text("h1") == "db_deadlock/easy/seed=0"
    assert "/run/1/episode/" in page.url


def test_a_filter_keeps_what_it_names(page: Any, viewer: str, runs: tuple[Path, Path]) -> None:
    page.goto(viewer + "/run/1")
    page.select_option("select[name=tier]", "medium")
    page.select_option("select[name=sort]", "-reward")
    page.click("#filters button")
    rows = cells(page, "table.episodes")
    want = [r for r in jsonl(runs[1] / "results.jsonl") if r["difficulty"] == "medium"]
    assert len(rows) == len(want) > 0
    assert all("/medium/" in r[1] for r in rows)
    rewards = [float(r[5]) for r in rows]
    assert rewards == sorted(rewards, reverse=True)


def test_two_runs_compared(page: Any, viewer: str, runs: tuple[Path, Path]) -> None:
    page.goto(viewer + "/")
    page.select_option("select[name=a]", "0")
    page.select_option("select[name=b]", "1")
    page.click("#compare-form button")
    assert "24 scenario(s) played by both" in page.inner_text("main")
    sides = cells(page, "#sides")
    assert sides[0] == ["success", "100%", "100%"]
    differences = cells(page, "#differences")
    gaps = [abs(float(row[3])) for row in differences]
    assert len(gaps) == 24 and gaps == sorted(gaps, reverse=True)
    # heuristic minus oracle, scenario by scenario, as the results say
    reward = [{f"{r['failure_type']}/{r['difficulty']}/{r['seed']}": r["cumulative_reward"]
               for r in jsonl(run / "results.jsonl")} for run in runs]  # fmt: skip
    mean = sum(reward[1][k] - reward[0][k] for k in reward[0]) / 24
    paired = cells(page, "#paired")
    assert paired[0][0] == "reward" and float(paired[0][1]) == pytest.approx(mean, abs=0.05)
    assert " to " in paired[0][2] and paired[1][1] == "+0 points"


def test_a_page_follows_a_run_being_written(
    page: Any, viewer: str, runs: tuple[Path, Path], live: Path
) -> None:
    page.goto(viewer + "/run/2")
    assert len(cells(page, "table.episodes")) == 3
    started = {"event": "episode_started", "episode_id": "e" * 32, "failure_type": "cascade",
               "difficulty": "medium", "seed": 9}  # fmt: skip
    with (live / "log.jsonl").open("ab") as handle:
        handle.write(orjson.dumps(started) + b"\n")
    page.wait_for_selector("ul.in-flight >> text=in flight: cascade/medium/seed=9")
    lines = (runs[0] / "results.jsonl").read_bytes().splitlines(keepends=True)
    with (live / "results.jsonl").open("ab") as handle:
        handle.write(b"".join(lines[3:8]) + lines[8][:50])  # the last line still torn
    page.wait_for_function("document.querySelectorAll('table.episodes tbody tr').length == 8")
    assert len(cells(page, "table.episodes")) == 8


def test_an_episode_in_flight_shows_its_turns_so_far(page: Any, viewer: str, live: Path) -> None:
    episode = "d" * 32
    started = {"event": "episode_started", "episode_id": episode, "failure_type": "dns_outage",
               "difficulty": "hard", "seed": 4}  # fmt: skip
    with (live / "log.jsonl").open("ab") as handle:
        handle.write(orjson.dumps(started) + b"\n")
    page.goto(f"{viewer}/run/2/episode/{episode}")
    assert "in flight, 0 turn(s) so far" in page.inner_text("#in-flight")
    turn = {"event": "turn", "episode_id": episode, "step": 1, "role": "sre",
            "action_type": "restart", "target": "db", "reward": -5.0}  # fmt: skip
    with (live / "log.jsonl").open("ab") as handle:
        handle.write(orjson.dumps(turn) + b"\n")
    page.wait_for_selector("#in-flight >> text=1 turn(s) so far")  # the page follows
    assert page.inner_text("li.step .action") == "action: restart db"
