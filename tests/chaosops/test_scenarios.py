"""Canonical suite files and the TOML loader (chaosops.scenarios)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from chaosops.curriculum.generator import scenarios_for_tier
from chaosops.env.models import AgentRole, DifficultyTier, FailureType
from chaosops.env.world_sim import Scenario
from chaosops.scenarios import (
    MAX_MAX_STEPS,
    MAX_SEED,
    ScenarioFileError,
    canonical_suite_paths,
    folder_suite_files,
    load_scenarios,
    load_suite,
    load_suite_entries,
    read_suite,
)

REPO = Path(__file__).resolve().parents[2]
TIERS = ("easy", "medium", "hard")


@pytest.mark.parametrize("tier", TIERS)
def test_repo_suite_files_equal_scenarios_for_tier(tier: str) -> None:
    assert load_suite(REPO / "scenarios" / f"{tier}.toml") == scenarios_for_tier(
        tier, episodes_per_type=5
    )


def test_canonical_paths_are_package_data_and_match() -> None:
    paths = canonical_suite_paths()
    assert [p.name for p in paths] == ["easy.toml", "medium.toml", "hard.toml"]
    assert all(p.parent.name == "suites" for p in paths)
    for tier, path in zip(TIERS, paths, strict=True):
        assert load_suite(path) == scenarios_for_tier(tier, episodes_per_type=5)


def test_the_repository_suites_are_the_package_data_itself() -> None:
    # one source: scenarios/ is a link to chaosops/suites, not a copy
    assert (REPO / "scenarios").is_symlink()
    assert (REPO / "scenarios").resolve() == (REPO / "chaosops" / "suites").resolve()


def test_load_folder_sorted() -> None:
    got = load_scenarios(REPO / "scenarios")
    expected = [
        s for t in ("easy", "hard", "medium") for s in scenarios_for_tier(t, episodes_per_type=5)
    ]
    assert got == expected
    assert all(isinstance(s, Scenario) for s in got)


def write(tmp_path: Path, text: str, name: str = "suite.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_full_format(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
name = "mine"
description = "custom"
difficulty = "medium"

[[scenarios]]
failure_type = "rogue_deploy_bot"
seed_start = 10
count = 3
seed_step = 5
inject_misleading_logs = true
[scenarios.turn_timeout]
sre = 5
manager = 2.5

[[scenarios]]
failure_type = "db_deadlock"
difficulty = "hard"
seeds = [4]
max_steps = 9
inject_misleading_logs = false
""",
    )
    suite = read_suite(path)
    assert (suite.name, suite.description) == ("mine", "custom")
    base = Scenario.from_type(
        F := FailureType.ROGUE_DEPLOY_BOT, seed=0, difficulty=DifficultyTier.MEDIUM, max_steps=18
    )
    expected = [
        dataclasses.replace(base, seed=s, inject_misleading_logs=True) for s in (10, 15, 20)
    ]
    hard = Scenario.from_type(FailureType.DB_DEADLOCK, seed=4, difficulty="hard", max_steps=9)
    expected.append(dataclasses.replace(hard, inject_misleading_logs=False))
    assert suite.scenarios == expected == load_suite(path)
    assert expected[0].failure_type is F
    entries = load_suite_entries(path)
    assert entries[0].turn_timeout == {AgentRole.SRE: 5.0, AgentRole.MANAGER: 2.5}
    assert entries[3].turn_timeout is None
    assert (entries[3].entry, entries[3].suite) == (1, "mine")


def test_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'name = "x"\n[[scenarios]]\nfailure_type = "cascade"\n'
        'difficulty = "hard"\nseeds = [1, 2]\n',
    )
    assert load_suite(path) == [
        Scenario.from_type(FailureType.CASCADE, seed=s, difficulty="hard", max_steps=25)
        for s in (1, 2)
    ]


def _error(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ScenarioFileError) as info:
        load_suite(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    return message


ENTRY = 'name = "x"\n[[scenarios]]\nfailure_type = "cascade"\ndifficulty = "easy"\nseeds = [1]\n'


def test_unknown_failure_type_lists_valid_ones(tmp_path: Path) -> None:
    msg = _error(
        tmp_path,
        ENTRY + '[[scenarios]]\nfailure_type = "db_dedlock"\nseeds = [1]\ndifficulty = "easy"\n',
    )
    assert "scenarios[1].failure_type" in msg and "db_dedlock" in msg
    for ft in FailureType:
        assert ft.value in msg


def test_unknown_difficulty_in_the_suite_or_an_entry(tmp_path: Path) -> None:
    msg = _error(tmp_path, 'difficulty = "hardest"\n' + ENTRY)
    assert msg.endswith("difficulty: unknown difficulty 'hardest'; valid: easy, medium, hard")
    msg = _error(tmp_path, ENTRY.replace('difficulty = "easy"', 'difficulty = "meh"'))
    assert "scenarios[0].difficulty: unknown difficulty 'meh'; valid: easy, medium, hard" in msg


def test_broken_toml_names_the_line(tmp_path: Path) -> None:
    msg = _error(tmp_path, ENTRY + "max_steps = \n")
    assert "line 6" in msg and "invalid TOML" in msg


def test_missing_field(tmp_path: Path) -> None:
    msg = _error(tmp_path, 'name = "x"\n[[scenarios]]\ndifficulty = "easy"\nseeds = [1]\n')
    assert "scenarios[0].failure_type" in msg and "missing" in msg
    msg = _error(
        tmp_path, 'name = "x"\n[[scenarios]]\nfailure_type = "cascade"\ndifficulty = "easy"\n'
    )
    assert "scenarios[0].seeds" in msg and "missing" in msg
    msg = _error(tmp_path, 'name = "x"\n[[scenarios]]\nfailure_type = "cascade"\nseeds = [1]\n')
    assert "scenarios[0].difficulty" in msg and "easy" in msg
    msg = _error(tmp_path, '[[scenarios]]\nfailure_type = "cascade"\nseeds = [1]\n')
    assert "name" in msg and "missing" in msg
    msg = _error(tmp_path, 'name = "x"\n')
    assert "scenarios" in msg and "missing" in msg


def test_wrong_types(tmp_path: Path) -> None:
    msg = _error(tmp_path, ENTRY + 'max_steps = "12"\n')
    assert "scenarios[0].max_steps" in msg and "integer" in msg
    msg = _error(tmp_path, ENTRY.replace("[1]", '[1, "two"]'))
    assert "scenarios[0].seeds[1]" in msg and "integer" in msg
    msg = _error(tmp_path, ENTRY + "inject_misleading_logs = 1\n")
    assert "scenarios[0].inject_misleading_logs" in msg
    msg = _error(tmp_path, ENTRY.replace('"easy"', '"extreme"'))
    assert "scenarios[0].difficulty" in msg and "easy, medium, hard" in msg
    msg = _error(tmp_path, ENTRY + "[scenarios.turn_timeout]\nboss = 1\n")
    assert "scenarios[0].turn_timeout" in msg and "sre" in msg
    msg = _error(tmp_path, ENTRY + "[scenarios.turn_timeout]\nsre = 0\n")
    assert "scenarios[0].turn_timeout.sre" in msg
    msg = _error(tmp_path, ENTRY + '[scenarios.turn_timeout]\nmanager = "fast"\n')
    assert "scenarios[0].turn_timeout.manager: Input should be a valid number (got 'fast')" in msg
    assert ".float" not in msg and "roles: sre, dev, manager, oversight" in msg


def test_a_table_field_given_a_value_says_table(tmp_path: Path) -> None:
    # TOML's word, not Python's "dictionary"
    msg = _error(tmp_path, ENTRY + "turn_timeout = 5\n")
    assert "scenarios[0].turn_timeout: Input should be a table (got 5)" in msg
    assert "dictionary" not in msg


def test_unknown_field_and_seed_forms(tmp_path: Path) -> None:
    msg = _error(tmp_path, ENTRY + "seedz = [2]\n")
    assert "scenarios[0].seedz" in msg and "unknown field" in msg and "seeds" in msg
    msg = _error(tmp_path, ENTRY + "count = 2\nseed_start = 1\n")
    assert "scenarios[0].seeds" in msg and "not both" in msg
    # each entry-level error at the field it is about
    msg = _error(tmp_path, ENTRY.replace("seeds = [1]", "count = 2"))
    assert "scenarios[0].seed_start: missing; seed_start and count go together" in msg
    msg = _error(tmp_path, ENTRY.replace("seeds = [1]", "seed_start = 2"))
    assert "scenarios[0].count: missing; seed_start and count go together" in msg
    msg = _error(tmp_path, ENTRY.replace("seeds = [1]", ""))
    assert "scenarios[0].seeds: missing; give seeds = [...] or seed_start + count" in msg
    msg = _error(tmp_path, ENTRY.replace("seeds = [1]", "seeds = []"))
    assert "scenarios[0].seeds: empty; give at least one seed" in msg


def test_nonexistent_file_and_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(ScenarioFileError, match="no such file"):
        load_scenarios(tmp_path / "missing.toml")
    with pytest.raises(ScenarioFileError, match=r"no \*\.toml"):
        load_scenarios(tmp_path)


def test_seeds_are_from_0_to_max_seed(tmp_path: Path) -> None:
    # a negative seed replays its positive twin (random.Random takes |seed|),
    # and a seed past 64 bits cannot be written to results.jsonl
    msg = _error(tmp_path, ENTRY.replace("[1]", "[-7]"))
    assert "scenarios[0].seeds[0]" in msg and "(got -7)" in msg and f"0 to {MAX_SEED}" in msg
    msg = _error(tmp_path, ENTRY.replace("[1]", "[99999999999999999999]"))
    assert "scenarios[0].seeds[0]" in msg and f"0 to {MAX_SEED}" in msg
    ranged = ENTRY.replace("seeds = [1]", "seed_start = {start}\ncount = 3\nseed_step = {step}")
    msg = _error(tmp_path, ranged.format(start=-1, step=1))
    assert "scenarios[0].seed_start" in msg and "(got -1)" in msg
    msg = _error(tmp_path, ranged.format(start=1, step=-1))
    assert "scenarios[0].seed_step: seed_start + seed_step * (count - 1) = -1 is out" in msg
    msg = _error(tmp_path, ranged.format(start=MAX_SEED - 1, step=1))
    assert f"scenarios[0].count: seed_start + seed_step * (count - 1) = {MAX_SEED + 1}" in msg
    top = write(tmp_path, ranged.format(start=MAX_SEED - 2, step=1))
    assert [s.seed for s in load_suite(top)] == [MAX_SEED - 2, MAX_SEED - 1, MAX_SEED]


def test_max_steps_is_bounded(tmp_path: Path) -> None:
    msg = _error(tmp_path, ENTRY + f"max_steps = {MAX_MAX_STEPS + 1}\n")
    assert "scenarios[0].max_steps" in msg and f"from 1 to {MAX_MAX_STEPS}" in msg
    path = write(tmp_path, ENTRY + f"max_steps = {MAX_MAX_STEPS}\n")
    assert load_suite(path)[0].max_steps == MAX_MAX_STEPS


def test_seed_step_with_a_seed_list_is_an_error(tmp_path: Path) -> None:
    # it would have no effect: a typo never passes silently
    msg = _error(tmp_path, ENTRY + "seed_step = 5\n")
    assert "scenarios[0].seed_step: seed_step goes with seed_start + count" in msg


@pytest.mark.parametrize("value", ["inf", "+inf", "nan", "-1.0", "0"])
def test_turn_timeouts_are_finite_and_positive(tmp_path: Path, value: str) -> None:
    # as --turn-timeout: an infinite deadline would be written as null in run.json
    msg = _error(tmp_path, ENTRY + f"[scenarios.turn_timeout]\nsre = {value}\n")
    assert "scenarios[0].turn_timeout.sre: expected a finite number of seconds > 0" in msg


def test_an_empty_name_is_an_error(tmp_path: Path) -> None:
    msg = _error(tmp_path, ENTRY.replace('name = "x"', 'name = ""'))
    assert msg.endswith('expected a non-empty string, e.g. name = "my-suite"')


def test_byte_order_mark_is_read_and_other_encodings_named(tmp_path: Path) -> None:
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + ENTRY.encode())
    assert [s.seed for s in load_suite(path)] == [1]
    path.write_bytes(ENTRY.replace('"x"', '"caf\xe9"').encode("latin-1"))
    with pytest.raises(ScenarioFileError) as info:
        load_suite(path)
    assert str(info.value) == f"{path}: not UTF-8 text (byte 0xe9 at offset 11); " + (
        "a suite file is UTF-8 TOML"
    )


def test_odd_keys_and_entries_stay_one_line_in_file_terms(tmp_path: Path) -> None:
    msg = _error(tmp_path, ENTRY + '"a\\nb" = 1\n')
    assert 'scenarios[0]."a\\nb": unknown field' in msg
    # a key is shown as written, what does not print escaped
    msg = _error(tmp_path, ENTRY + '"café" = 1\n')
    assert 'scenarios[0]."café": unknown field' in msg
    msg = _error(tmp_path, ENTRY + '"a\\u2028b" = 1\n')  # a line separator
    assert 'scenarios[0]."a\\u2028b": unknown field' in msg
    msg = _error(tmp_path, 'name = "x"\nscenarios = [1]\n')
    assert msg.endswith(
        "scenarios[0]: Input should be a table (got 1); expected one or more [[scenarios]] tables"
    )


def test_a_folder_entry_that_is_not_a_file_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, ENTRY, "b.toml")
    (tmp_path / "sub.toml").mkdir()  # a folder named *.toml is not a suite: left out
    (tmp_path / ".#b.toml").symlink_to("user@host.1234")  # Emacs' lock file while editing b
    assert [s.seed for s in load_scenarios(tmp_path)] == [1]
    (tmp_path / "a.toml").symlink_to(tmp_path / "gone.toml")
    with pytest.raises(ScenarioFileError) as info:
        load_scenarios(tmp_path)
    assert str(info.value) == (
        f"{tmp_path / 'a.toml'}: a link to a missing file; a suite folder holds .toml suite files"
    )
    (tmp_path / "a.toml").unlink()
    os.mkfifo(tmp_path / "a.toml")  # reading it would wait for a writer forever
    with pytest.raises(ScenarioFileError, match=r"a\.toml: not a regular file"):
        folder_suite_files(tmp_path)
    with pytest.raises(ScenarioFileError, match=r"sub\.toml: folder holds no \*\.toml"):
        folder_suite_files(tmp_path / "sub.toml")
