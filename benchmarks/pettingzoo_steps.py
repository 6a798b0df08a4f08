"""Steps a second of the PettingZoo AEC environment under a masked random
policy (``env.last()``, a sample from the mask, ``env.step``), with the text
view in ``infos`` off (the default) and on (``text=True``), the two sides
alternated and the medians given. Needs the pettingzoo extra. Usage::

    python benchmarks/pettingzoo_steps.py [--episodes 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from chaosops.train.pettingzoo import aec_env


def steps_per_second(text: bool, episodes: int, difficulty: str) -> float:
    env = aec_env(difficulty=difficulty, text=text)
    steps, started = 0, time.perf_counter()
    for seed in range(episodes):
        env.reset(seed=seed)
        space = env.action_space(env.agent_selection)
        space.seed(seed)
        for _ in env.agent_iter():
            observation, _, terminated, truncated, _ = env.last()
            ended = terminated or truncated
            env.step(None if ended else space.sample(observation["action_mask"]))
            steps += 1
    return steps / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=300, help="episodes a measurement")
    parser.add_argument("--rounds", type=int, default=5, help="measurements a side")
    args = parser.parse_args()
    for difficulty in ("easy", "hard"):
        plain, texted = [], []
        for _ in range(args.rounds):
            plain.append(steps_per_second(False, args.episodes, difficulty))
            texted.append(steps_per_second(True, args.episodes, difficulty))
        print(f"{difficulty}: {statistics.median(plain):,.0f} steps/s without the text view, "
              f"{statistics.median(texted):,.0f} with it (medians of {args.rounds})")  # fmt: skip


if __name__ == "__main__":
    main()
