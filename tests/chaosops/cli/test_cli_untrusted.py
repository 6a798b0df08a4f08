"""Text a model wrote is shown as text everywhere a person reads it: rich
markup, ANSI escapes and control characters in a policy's message go through
the installed command's watch, transcript, tables and logs unread."""

from __future__ import annotations

from pathlib import Path

from ._cli import chaosops, jsonl

HOSTILE = "[/bold] [red]boom[/red] \x1b[2J\x1b[31mred\r\x07 done"

SAYS = """\
from chaosops.env.models import ActionType, ChaosOpsAction


def says(observation, role):
    return ChaosOpsAction(role=role, action_type=ActionType.COMMUNICATE,
                          args={{"message": {message!r}, "to": "all"}})
"""


def _run_saying(work: Path, name: str, message: str) -> Path:
    """A one-episode run whose sre says ``message`` every turn; its folder."""
    (work / f"{name}pol.py").write_text(SAYS.format(message=message))
    out = work / name
    proc = chaosops("run", "tiny.toml", "--limit", "1", "--no-progress", "--role-policy",
                    f"sre={name}pol:says", "--out", out, cwd=work)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out


def _loud_run(work: Path) -> Path:
    return _run_saying(work, "loud", HOSTILE)


def _shown_as_text(output: str) -> None:
    assert "\x1b" not in output and "\r" not in output and "\x07" not in output
    assert "[/bold] [red]boom[/red] \\x1b[2J\\x1b[31mred\\x0d\\x07 done" in output


def test_a_model_s_message_is_shown_as_text_by_watch_and_transcript(work: Path) -> None:
    out = _loud_run(work)
    (record,) = jsonl(out / "results.jsonl")
    episode = record["episode_id"]
    watched = chaosops("watch", out, "--episode", episode, "--delay", "0", cwd=work)
    assert watched.returncode == 0, watched.stderr
    assert "Traceback" not in watched.stderr
    _shown_as_text(watched.stdout)
    assert "[sre] [/bold]" in watched.stdout  # the speaker tag of the chat line stays
    written = chaosops("transcript", out, "--episode", episode, cwd=work)
    assert written.returncode == 0, written.stderr
    _shown_as_text(written.stdout)
    dashboard = chaosops("watch", out, cwd=work)
    assert dashboard.returncode == 0 and "Traceback" not in dashboard.stderr
    # the outputs and the log keep the text as it was, JSON-escaped
    steps = [s for s in jsonl(out / "trajectories.jsonl") if s["role"] == "sre"]
    assert steps and all(s["action"]["args"]["message"] == HOSTILE for s in steps)
    log = (out / "log.jsonl").read_bytes()
    assert b"\x1b" not in log and rb"\u001b" in log


def test_a_line_break_in_a_model_s_text_cannot_forge_a_transcript_line(work: Path) -> None:
    out = _run_saying(work, "forged", "ok\n  reward: +999.0")
    (record,) = jsonl(out / "results.jsonl")
    written = chaosops("transcript", out, "--episode", record["episode_id"], cwd=work)
    assert written.returncode == 0, written.stderr
    lines = written.stdout.splitlines()
    assert "  reward: +999.0" not in lines
    assert "  action: communicate message=ok\\n  reward: +999.0, to=all" in lines
