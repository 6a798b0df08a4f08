"""``chaosops run --policy hf`` through the installed command, on a tiny
checkpoint written by the session's fixture: a run, its batches, its
records, ``--resume`` refusing other weights, and bad input."""

from __future__ import annotations

import json
import re
import shutil
import socketserver
import threading
from pathlib import Path

import orjson
import pytest

from chaosops.agents.hf import weights_hash

from ...cli._cli import TINY, TINY_SUITE, TORCH_TIMEOUT, assert_one_error_line, chaosops

# each test starts a few commands that load torch: each may take TORCH_TIMEOUT
pytestmark = pytest.mark.timeout(3 * TORCH_TIMEOUT)

FAST = ("--hf-max-new-tokens", "4", "--hf-device", "cpu")


def _suite(tmp_path: Path) -> Path:
    (tmp_path / "tiny.toml").write_text(TINY_SUITE)
    return tmp_path


def test_a_run_plays_the_checkpoint_in_batches_and_records_it(
    scripted: Path, tmp_path: Path
) -> None:
    work = _suite(tmp_path)
    done = chaosops("run", *TINY, "--policy", "hf", "--hf-model", scripted, *FAST,
                    "--hf-batch", "4", "--hf-batch-wait-ms", "50", "--concurrency", "4",
                    "--out", "run", cwd=work, timeout=TORCH_TIMEOUT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = json.loads((work / "run" / "run.json").read_text())
    played = record["hf"]["hf"]
    assert played["model"] == str(scripted) and played["weights"] == weights_hash(str(scripted))
    assert played["resolved_device"] == "cpu" and played["settled"] == "tools"
    summary = json.loads((work / "run" / "summary.json").read_text())
    assert summary["hf"]["hf"]["weights"] == played["weights"]
    roles = summary["players"]
    expected = {"policy": "hf", "model": str(scripted), "answer": "tools",
                "weights": played["weights"], "dtype": "auto", "device": "cpu"}  # fmt: skip
    assert roles["sre"] == expected
    # two episodes, each turn of both pending at once: batches of two
    calls = re.search(r"(\d+) turn\(s\) in (\d+) generate call\(s\) \(calls x batch size: (.*)\)",
                      done.stderr)  # fmt: skip
    assert calls is not None, done.stderr
    assert "x 2" in calls.group(3), calls.group(0)
    steps = [s for line in (work / "run" / "results.jsonl").read_bytes().splitlines()
             for s in orjson.loads(line)["steps"]]  # fmt: skip
    assert int(calls.group(1)) == len(steps) > 0
    traces = [orjson.loads(line) for line in (work / "run" / "trajectories.jsonl")
              .read_bytes().splitlines()]  # fmt: skip
    assert traces[0]["prompt"][0]["role"] == "system" and traces[0]["usage"]["prompt_tokens"] > 0
    # every answer was the tool call, read into the move it names
    assert {(s["action"]["action_type"], s["parse_error"]) for s in steps} == {("noop", None)}
    assert traces[0]["tool_calls"][0]["name"] == "take_action"


def test_resume_refuses_other_weights_under_the_same_path(
    scripted: Path, tiny: Path, tmp_path: Path
) -> None:
    work = _suite(tmp_path)
    model = shutil.copytree(scripted, work / "model")
    first = chaosops("run", *TINY, "--policy", "hf", "--hf-model", model, *FAST, "--limit", "1",
                     "--out", "run", cwd=work, timeout=TORCH_TIMEOUT)  # fmt: skip
    assert first.returncode == 0, first.stderr
    shutil.rmtree(model)
    shutil.copytree(tiny, model)  # trained further, say: the same path, other weights
    again = chaosops(
        "run", "--resume", "--out", "run", "--no-progress", cwd=work, timeout=TORCH_TIMEOUT
    )
    assert_one_error_line(again, "--hf-model's weights", "differs", "recorded")
    assert len((work / "run" / "results.jsonl").read_bytes().splitlines()) == 1  # kept


def test_bad_models_and_values_are_one_line_before_any_episode(tiny: Path, tmp_path: Path) -> None:
    work = _suite(tmp_path)
    (work / "empty").mkdir()
    untemplated = shutil.copytree(tiny, work / "untemplated")
    (untemplated / "chat_template.jinja").unlink()
    cases = [
        (["--hf-model", "empty"], ["--hf-model empty", "holds no config.json"]),
        (["--hf-model", untemplated], ["no chat template"]),
        (["--hf-model", tiny, "--hf-device", "cuda:7"], ["cuda:7", "CUDA device"]),
        (["--hf-model", tiny, "--hf-device", "abacus"], ["'abacus'", "expected cpu"]),
        (["--hf-model", tiny, "--hf-batch", "0"], ["--hf-batch", "from 1 to 4096", "'0'"]),
        (["--hf-model", tiny, "--hf-dtype", "float8"], ["--hf-dtype", "'float8'"]),
        ([], ["--policy hf", "--hf-model"]),
    ]
    for i, (flags, needles) in enumerate(cases):
        out = work / f"out{i}"
        done = chaosops(
            "run", *TINY, "--policy", "hf", *flags, "--out", out, cwd=work, timeout=TORCH_TIMEOUT
        )
        assert done.returncode == 2, (flags, done.stderr)
        assert_one_error_line(done, *needles)
        assert not (out / "results.jsonl").exists() or not (out / "results.jsonl").read_bytes()


def test_a_checkpoint_that_cannot_load_is_one_line_and_no_network(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = _suite(tmp_path)
    truncated = shutil.copytree(tiny, work / "truncated")
    weights = truncated / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    hub = _Counting()  # where the hub client would go, on loopback: nobody may call
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    cases = [
        ("truncated", ["--hf-model truncated", "invalid header"]),
        ("./nothere", ["--hf-model ./nothere: no such folder"]),
        (str(tiny / "model.safetensors"), ["is a file", "config.json"]),
        ("someorg/some-model", ["neither a folder here nor a model in the local hub cache"]),
    ]
    try:
        for i, (model, needles) in enumerate(cases):
            done = chaosops("run", *TINY, "--policy", "hf", "--hf-model", model,
                            "--out", work / f"out{i}", cwd=work, timeout=TORCH_TIMEOUT)  # fmt: skip
            assert done.returncode == 2, (model, done.stderr)
            assert_one_error_line(done, *needles)
    finally:
        hub.close()
    assert hub.connections == 0


class _Counting:
    """A loopback TCP listener that counts the connections made to it."""

    def __init__(self) -> None:
        self.connections = 0
        self._server = socketserver.TCPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _handler(self) -> type[socketserver.BaseRequestHandler]:
        counting = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                counting.connections += 1

        return Handler

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def test_a_run_file_names_local_models(scripted: Path, tmp_path: Path) -> None:
    work = _suite(tmp_path)
    (work / "run.toml").write_text(
        f'paths = ["tiny.toml"]\npolicy = "heuristic"\n[roles]\nsre = "small"\n'
        f'[hf.small]\nmodel = "{scripted}"\nmax_new_tokens = 4\ndevice = "cpu"\n'
    )
    done = chaosops("run", "--config", "run.toml", "--episodes-per-type", "1", "--no-progress",
                    "--out", "run", cwd=work, timeout=TORCH_TIMEOUT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = json.loads((work / "run" / "run.json").read_text())
    assert list(record["hf"]) == ["small"] and record["hf"]["small"]["max_new_tokens"] == 4
    (work / "bad.toml").write_text(f'[hf.small]\nmodel = "{scripted}"\nbatch = "4"\n')
    bad = chaosops(
        "run", "--config", "bad.toml", *TINY, "--out", "bad", cwd=work, timeout=TORCH_TIMEOUT
    )
    assert_one_error_line(bad, "bad.toml", "hf.small.batch", "expected an integer from 1 to 4096")
