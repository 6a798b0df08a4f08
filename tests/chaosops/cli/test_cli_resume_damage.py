"""``chaosops run --resume`` on a folder damaged every way a file can be (each
of results.jsonl and trajectories.jsonl missing, emptied, its last line cut
or its first line gone): nothing already written is lost. A resume either
refuses in one line, touching nothing, or keeps every episode still whole
and plays the others again."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import orjson
import pytest

from ._cli import assert_one_error_line, chaosops, finished_run, snapshot

DAMAGES = {
    "missing": lambda data: None,
    "emptied": lambda data: b"",
    "last line cut": lambda data: data[: data.rstrip(b"\n").rfind(b"\n") + 1 + 20],
    "first line gone": lambda data: data[data.find(b"\n") + 1 :],
}


def _whole(folder: Path) -> dict[str, str]:
    """Each episode whose results line and every trajectory line are there: run key -> id."""

    def read(name: str) -> list[dict]:
        path = folder / name
        lines = path.read_bytes().splitlines() if path.exists() else []
        parsed = []
        for line in lines:
            try:
                parsed.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                continue
        return parsed

    turns = Counter(t.get("episode_id") for t in read("trajectories.jsonl"))
    return {r["run_key"]: r["episode_id"] for r in read("results.jsonl")
            if turns[r["episode_id"]] == len(r["steps"])}  # fmt: skip


@pytest.mark.parametrize("damage", list(DAMAGES))
@pytest.mark.parametrize("name", ["results.jsonl", "trajectories.jsonl"])
def test_a_damaged_folder_loses_nothing_on_resume(work: Path, name: str, damage: str) -> None:
    run, _ = finished_run(work, f"whole-{name}-{damage}".replace(" ", "-"))
    out = work / f"damaged-{name}-{damage}".replace(" ", "-")
    shutil.copytree(run, out)
    changed = DAMAGES[damage]((out / name).read_bytes())
    if changed is None:
        (out / name).unlink()
    else:
        (out / name).write_bytes(changed)
    whole, before = _whole(out), snapshot(out)
    resumed = chaosops("run", "--resume", "--out", out, "--no-progress", cwd=work)
    if resumed.returncode == 2:
        assert_one_error_line(resumed, name)
        assert snapshot(out) == before  # refused: nothing touched
        return
    assert resumed.returncode == 0, resumed.stderr
    after = _whole(out)
    assert {key: after.get(key) for key in whole} == whole  # every whole episode kept
    assert len(after) == 2  # and the others played again
