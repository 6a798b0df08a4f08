"""Episodes a person can name: ids that differ from their first characters, a
short start of one, or the scenario; an ambiguous name lists the candidates."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ._cli import assert_one_error_line, chaosops, jsonl


def test_episodes_are_named_by_a_short_start_or_their_scenario(
    tmp_path: Path, canonical_size: int
) -> None:
    out = tmp_path / "run"
    proc = chaosops("run", "--policy", "oracle", "--no-progress", "--out", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    records = jsonl(out / "results.jsonl")
    ids = [r["episode_id"] for r in records]
    assert len(set(ids)) == len(ids) == canonical_size
    first = records[0]
    # the shortest start of its id that no other id shares (random ids: usually 2 or 3)
    size = next(
        n for n in range(1, 33) if sum(i.startswith(first["episode_id"][:n]) for i in ids) == 1
    )
    short = chaosops("transcript", out, "--episode", first["episode_id"][:size], cwd=tmp_path)
    assert short.returncode == 0, short.stderr
    assert short.stdout.startswith(f"episode {first['episode_id']}")
    scenario = f"{first['failure_type']}/{first['difficulty']}/seed={first['seed']}"
    named = chaosops("transcript", out, "--episode", scenario, cwd=tmp_path)
    assert named.returncode == 0 and named.stdout == short.stdout
    # canonical_size ids over 16 first characters: some character starts several of them
    shared, count = Counter(i[0] for i in ids).most_common(1)[0]
    ambiguous = chaosops("watch", out, "--episode", shared, cwd=tmp_path)
    assert ambiguous.returncode == 2
    line = assert_one_error_line(ambiguous, f"'{shared}' names {count} episodes", "give more")
    assert sum(i[:12] in line for i in ids if i.startswith(shared)) == min(count, 5)
    missing = chaosops("transcript", out, "--episode", "cascade/easy/seed=1", cwd=tmp_path)
    assert_one_error_line(missing, "no finished episode", "failure/tier/seed=N")


def test_a_sample_has_a_handle_of_its_own_and_transcript_lists_them(tmp_path: Path) -> None:
    out = tmp_path / "sampled"
    proc = chaosops("run", "--tier", "hard", "--samples", "3", "--failure-type", "cascade",
                    "--no-progress", "--out", out, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    records = jsonl(out / "results.jsonl")
    third = next(r for r in records if r["run_key"].endswith("/#2"))
    handle = f"cascade/hard/seed={third['seed']}#2"
    for name in (handle, third["run_key"]):
        shown = chaosops("transcript", out, "--episode", name, cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.startswith(f"episode {third['episode_id']}")
    several = chaosops("transcript", out, "--episode", handle[:-2], cwd=tmp_path)
    assert_one_error_line(several, "names 3 episodes", f"{handle[:-2]}#1", "seed=N#K")
    listed = chaosops("transcript", out, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["episode", "id", "policy", "outcome", "mttr", "steps", "reward"]
    assert len(lines) == 1 + len(records)
    row = next(line for line in lines if line.startswith(handle + " "))
    assert third["episode_id"][:12] in row and f"{third['cumulative_reward']:+.1f}" in row
