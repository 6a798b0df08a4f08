"""The tiny model's tokenizer reads a prompt as its saved checkpoint does, so
that a model trained with it meets the same tokens under ``--policy hf``;
and the runtime-format SFT example runs where TRL is installed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="the train extra (TRL, torch) is not installed")

EXAMPLE = Path(__file__).parents[3] / "examples" / "sft_runtime.py"
PROMPT = [
    {"role": "system", "content": "You are the SRE.\n\n## Failures\n- db_deadlock: restart db"},
    {"role": "user", "content": "metrics:\n  auth (healthy, degraded)\n    p99 120 ms\n\n\nalerts"},
]


def test_the_tokenizer_reads_a_prompt_as_its_checkpoint_does(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    from chaosops.train.tiny import chaosops_text, tiny_model, tiny_tokenizer

    built = tiny_tokenizer(chaosops_text(), vocab_size=512)
    built.save_pretrained(tmp_path)
    tiny_model(built, width=32).save_pretrained(tmp_path)  # a checkpoint: its config beside
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    text = built.apply_chat_template(PROMPT, add_generation_prompt=True, tokenize=False)
    assert text == reloaded.apply_chat_template(PROMPT, add_generation_prompt=True, tokenize=False)
    ids = built(text, add_special_tokens=False)["input_ids"]
    assert ids == reloaded(text, add_special_tokens=False)["input_ids"]
    assert getattr(built, "response_template", None)  # TRL parses the calls with it


@pytest.mark.timeout(900)  # the bound of its subprocess (600 s), not pytest's default
def test_the_runtime_sft_example_trains_and_evaluates(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", "100", "--held-out", "2", "--out",
         str(tmp_path)],
        capture_output=True, text=True, timeout=600, check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.search(r"^sft step 100: loss [\d.]+, answers that are moves \d+%, the oracle's \d+%$",
                     done.stdout, re.M), done.stdout  # fmt: skip
    line = re.search(r"^held-out, through the runtime: success ([\d.]+), .* legal_share ([\d.]+), "
                     r"episodes 2\.00", done.stdout, re.M)  # fmt: skip
    assert line is not None, done.stdout
    assert (tmp_path / "model" / "model.safetensors").exists()
    assert (tmp_path / "held-out" / "summary.json").exists()
