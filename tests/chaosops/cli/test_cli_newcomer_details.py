"""The small things a newcomer met: a run file's name on its folder, one exit
code for a port in use, a repeated option refused, a mistyped run-file key with
the nearest one suggested, and the run page's counts written cleanly."""

from __future__ import annotations

import socket
from pathlib import Path

from ._cli import assert_one_error_line, chaosops, viewed_page


def test_a_run_file_s_name_names_its_folder(tmp_path: Path) -> None:
    (tmp_path / "named.toml").write_text('name = "my-trial"\nlimit = 1\n')
    proc = chaosops("run", "--config", "named.toml", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (folder,) = [p.name for p in (tmp_path / "runs").iterdir() if p.name != "latest"]
    assert folder.endswith("-my-trial")


def test_a_port_in_use_is_exit_2_for_every_server(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        mock = chaosops("mock-llm", "--port", port, cwd=tmp_path)
        assert mock.returncode == 2
        assert_one_error_line(mock, f"port {port}", "already in use")


def test_a_repeated_option_is_refused(tmp_path: Path) -> None:
    proc = chaosops("run", "--policy", "random", "--policy", "oracle", cwd=tmp_path)
    assert proc.returncode == 2
    assert_one_error_line(proc, "--policy is given 2 times", "--role-policy ROLE=POLICY")
    assert not (tmp_path / "runs").exists()
    twice = chaosops("run", "--tier", "easy", "--tier", "hard", "--limit", "1", "--no-progress",
                     "--out", tmp_path / "tiers", cwd=tmp_path)  # fmt: skip
    assert twice.returncode == 0, twice.stderr  # --tier adds a value each time


def test_a_mistyped_run_file_key_gets_the_nearest(tmp_path: Path) -> None:
    (tmp_path / "typo.toml").write_text('polcy = "oracle"\n[llm.a]\nmodel = "m"\n')
    proc = chaosops("run", "--config", "typo.toml", cwd=tmp_path)
    assert proc.returncode == 2
    assert_one_error_line(proc, "typo.toml: polcy: unknown key", "did you mean 'policy'?")
    (tmp_path / "typo2.toml").write_text('[llm.a]\nmodel = "m"\ntemprature = 1\n')
    proc = chaosops("run", "--config", "typo2.toml", cwd=tmp_path)
    assert_one_error_line(proc, "llm.a.temprature: unknown key", "did you mean 'temperature'?")


def test_the_run_page_counts_read_cleanly(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = chaosops("run", "--limit", "4", "--no-progress", "--out", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _, text = viewed_page(tmp_path, out)
    assert "4 of 4 episodes, success" in " ".join(text.split())


def test_an_unreachable_collector_beside_metrics_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, not listening: connections are refused
        proc = chaosops("run", "--otlp-endpoint", f"http://127.0.0.1:{port}", "--metrics-port",
                        "0", "--out", tmp_path / "traced", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 1
    assert_one_error_line(proc, "--otlp-endpoint", "cannot reach")
    assert not (tmp_path / "traced").exists()
