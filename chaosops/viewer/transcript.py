"""One episode as plain text, for papers, issues and diffs: each step's role,
what it saw (the view it was sent), what it answered, the action applied and
the reward."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from chaosops.outputs import ResultLine
from chaosops.untrusted import one_line, printable

INDENT = "    "


def transcript(record: ResultLine, steps: Sequence[Mapping[str, Any]]) -> str:
    """The text of the episode of results ``record``, with its trajectory ``steps``
    (the trajectory lines; without them, what the results line holds). What a
    model wrote is shown as text: its control characters (ANSI escapes
    included) are written as visible escapes."""
    return printable("\n".join(_lines(record, steps))) + "\n"


def _lines(record: ResultLine, steps: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    yield f"episode {record.get('episode_id')}  ({record.get('run_key')})"
    roles = record.get("roles") or {}
    played = ", ".join(
        f"{role} {p.get('policy')}" + (f" ({p['model']})" if p.get("model") else "")
        for role, p in roles.items()
        if p
    )
    yield f"scenario {_scenario(record)}; played by {played or record.get('policy')}"
    yield _outcome(record)
    by_step = {int(s.get("step", 0)): s for s in steps}
    for number, step in enumerate(record.get("steps") or (), start=1):
        yield ""
        yield from _step(number, step, by_step.get(number, {}))


def _scenario(record: ResultLine) -> str:
    text = (
        f"{record.get('failure_type')}/{record.get('difficulty')}/seed={record.get('seed')}, "
        f"at most {record.get('max_steps')} steps"
    )
    if record.get("rogue_fleet_agent"):
        text += f", rogue agent {record['rogue_fleet_agent']}"
    if record.get("inject_misleading_logs"):
        text += ", misleading logs"
    return text


def _outcome(record: ResultLine) -> str:
    if record.get("status") == "failed":
        return f"failed: {record.get('error')}"
    steps = len(record.get("steps") or ())
    verdict = (
        f"resolved in {steps} step{'s' if steps != 1 else ''}"
        if record.get("resolved")
        else "not resolved"
    )
    text = f"{verdict}; reward {float(record.get('cumulative_reward') or 0):+.1f}"
    text += f"; {record.get('timeouts', 0)} timed out, {record.get('errors', 0)} errors"
    if record.get("oversight_flags"):
        text += f"; oversight flagged {', '.join(map(str, record['oversight_flags']))}"
    return text


def _step(number: int, step: Mapping[str, Any], line: Mapping[str, Any]) -> Iterator[str]:
    heading = f"step {number}  {step.get('role')}"
    if step.get("latency_ms") is not None:
        heading += f"  {float(step['latency_ms']):.1f} ms"
    if step.get("tokens"):
        heading += f"  {step['tokens']} tokens"
    yield heading
    view = _view(line.get("prompt"))
    if view:
        yield "  saw:"
        yield from _indented(view)
    if line.get("completion") is not None:
        yield "  answered:"
        yield from _indented(str(line["completion"]))
    yield f"  action: {action_text(step.get('action') or {})}"
    yield f"  reward: {float(step.get('reward') or 0):+.1f}" + _parts(line)
    for name, label in (("parse_error", "parse error"), ("error", "error")):
        if line.get(name) or step.get(name):
            yield f"  {label}: {one_line(line.get(name) or step.get(name))}"
    if step.get("timed_out"):
        yield "  timed out: the fallback played"


def _view(prompt: Any) -> str:
    """The last user message of a rendered prompt (the role's view of this turn)."""
    if not isinstance(prompt, list):
        return ""
    users = [m for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
    return str(users[-1].get("content") or "") if users else ""


def _indented(text: str) -> Iterator[str]:
    for line in text.rstrip().splitlines() or [""]:
        yield f"{INDENT}{line}".rstrip()


def action_text(action: Mapping[str, Any]) -> str:
    """An applied action as one short line: ``restart db``, ``communicate message=...``
    (a line break in a model's text is written as ``\\n``)."""
    text = str(action.get("action_type"))
    if action.get("target") is not None:
        text += f" {action['target']}"
    if action.get("args"):
        text += " " + ", ".join(f"{k}={v}" for k, v in action["args"].items())
    return one_line(text)


def _parts(line: Mapping[str, Any]) -> str:
    team, oversight = line.get("team_reward"), line.get("oversight_reward")
    if team is None or oversight is None:
        return ""
    return f" (team {float(team):+.1f}, oversight {float(oversight):+.1f})"
