"""The held-out table and curve of ``examples/grpo_runtime.py``, over its seeds.

Reads ``FOLDER/seed*/report.json`` (one per seed the recipe ran), plays the
scripted baselines in the same seats (random, the heuristic teacher, the
oracle; the heuristic as the oversight), and prints one table: success and
mean return on the 55 held-out rows, by tier, each with its 95% interval,
and which seeds ran. Then, per seed, GRPO's paired gain over the teacher and
over SFT alone. ``--plot`` draws success and return against training time,
GRPO beside SFT alone. Usage::

    for s in 0 1 2 3 4; do python examples/grpo_runtime.py --seed $s --out runs/rl/seed$s; done
    python benchmarks/training_table.py runs/rl --plot docs/images/rl_curve.png
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from chaosops.agents.policies import policies_for, scripted_policy
from chaosops.agents.runner import run_batch
from chaosops.stats import mean_interval
from chaosops.train import held_out_scenarios

SEATS = ("sre", "dev", "manager")
TIERS = ("all", "easy", "medium", "hard")


def scripted(name: str) -> dict:
    """``name`` in the model's seats, the heuristic in the oversight's: figures by tier."""
    rows = held_out_scenarios()

    def players(scenario):
        mine = scripted_policy(name, scenario)
        return policies_for("heuristic", scenario) | dict.fromkeys(SEATS, mine)

    results = run_batch(rows, players)
    tiers = [str(sc.difficulty) for sc in rows]
    out = {}
    for tier in TIERS:
        part = [r for r, t in zip(results, tiers, strict=True) if tier in ("all", t)]
        out[tier] = {"success": _mean([float(r.resolved) for r in part]),
                     "return": _mean([r.cumulative_reward for r in part])}  # fmt: skip
    return out


def _mean(values: list[float]) -> dict:
    interval = mean_interval(values)
    half = 0.0 if interval is None else (interval[1] - interval[0]) / 2
    return {"mean": sum(values) / len(values), "ci95": half}


def cell(figures: dict) -> str:
    s, r = figures["success"], figures["return"]
    return f"{s['mean']:.0%} ± {s['ci95']:.0%}, {r['mean']:+.0f} ± {r['ci95']:.0f}"


def seeds_cell(reports: list[dict], branch: str, tier: str) -> str:
    """The mean over seeds of each seed's figure, and their range."""
    success = [r["figures"][branch][tier]["success"]["mean"] for r in reports]
    returns = [r["figures"][branch][tier]["return"]["mean"] for r in reports]
    spread = f"{statistics.mean(success):.0%} ({min(success):.0%}..{max(success):.0%})"
    return f"{spread}, {statistics.mean(returns):+.0f} ({min(returns):+.0f}..{max(returns):+.0f})"


def table(reports: list[dict]) -> None:
    seeds = ", ".join(str(r["seed"]) for r in reports)
    print("| policy in the sre, dev and manager seats | " + " | ".join(TIERS) + " | seeds |")
    print("| --- " * (len(TIERS) + 2) + "|")
    for name in ("random", "heuristic", "oracle"):
        figures = scripted(name)
        print(f"| {name} | " + " | ".join(cell(figures[t]) for t in TIERS) + " | scripted |")
    for branch, label in (("warm-up", "SFT on the heuristic (warm-up)"),
                          ("sft-alone", "SFT alone, the same time again"),
                          ("grpo", "SFT, then GRPO")):  # fmt: skip
        print(f"| {label} | " + " | ".join(seeds_cell(reports, branch, t) for t in TIERS)
              + f" | {seeds} |")  # fmt: skip


def gains(reports: list[dict]) -> None:
    print(
        "\n| seed | seconds | GRPO less teacher: success, return | GRPO less SFT alone | "
        "chaosops eval = in training |"
    )
    print("| --- | --- | --- | --- | --- |")
    for r in reports:
        same = r["figures"]["grpo"] == r["figures"]["grpo, chaosops eval"]
        print(f"| {r['seed']} | {r['seconds']:.0f} | {_gain(r['grpo_less']['teacher'])} | "
              f"{_gain(r['grpo_less']['sft-alone'])} | {'yes' if same else 'NO'} |")  # fmt: skip


def _gain(gain: dict) -> str:
    s, r = gain["success"], gain["return"]
    beyond = s["mean"] - s["ci95"] > 0 and r["mean"] - r["ci95"] > 0
    return (f"{s['mean']:+.2f} ± {s['ci95']:.2f}, {r['mean']:+.0f} ± {r['ci95']:.0f}"
            + (" (beyond)" if beyond else ""))  # fmt: skip


def plot(reports: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    for branch, color in (("grpo", "tab:blue"), ("sft-alone", "tab:orange")):
        for i, report in enumerate(reports):
            points = [p for p in report["curve"] if p["branch"] in ("warm-up", branch)]
            xs = [p["seconds"] for p in points]
            label = {"grpo": "SFT, then GRPO", "sft-alone": "SFT alone"}[branch] if not i else None
            top.plot(xs, [p["figures"]["all"]["success"]["mean"] for p in points], "o-",
                     color=color, alpha=0.6, label=label)  # fmt: skip
            bottom.plot(xs, [p["figures"]["all"]["return"]["mean"] for p in points], "o-",
                        color=color, alpha=0.6)  # fmt: skip
    teacher = reports[0]["figures"]["teacher"]["all"]
    top.axhline(teacher["success"]["mean"], color="gray", ls="--", label="heuristic teacher")
    bottom.axhline(teacher["return"]["mean"], color="gray", ls="--")
    top.set_ylabel("held-out success")
    bottom.set_ylabel("held-out mean return")
    bottom.set_xlabel("training seconds after the warm-up (one line a seed)")
    top.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="the folder holding seed*/report.json")
    parser.add_argument("--plot", default=None, help="PNG of the curve")
    args = parser.parse_args()
    paths = sorted(Path(args.folder).glob("seed*/report.json"))
    if not paths:
        parser.error(f"{args.folder}: no seed*/report.json; run examples/grpo_runtime.py first")
    reports = [json.loads(p.read_text()) for p in paths]
    table(reports)
    gains(reports)
    if args.plot:
        plot(reports, args.plot)


if __name__ == "__main__":
    main()
