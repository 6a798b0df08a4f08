"""A masked policy-gradient baseline on ChaosOps' PettingZoo environment.

One small network plays all four roles (the role is an input), choosing among
the moves its action mask allows. It is trained with REINFORCE on the easy
tier: each agent's move is credited with the team reward that followed it,
less a per-role running baseline. Every ``--eval-every`` episodes, the greedy
policy plays held-out seeds (the training seeds never reach them), next to a
random policy that samples the same masks. This is the baseline reward curve
a learned agent has to beat. Needs torch, the ``pettingzoo`` and ``plot``
extras. Usage::

    python examples/pettingzoo_pg.py [--episodes 20000] [--plot pg.png]
"""

from __future__ import annotations

import argparse
import json
import random
import time

import numpy as np
import torch

from chaosops.train.pettingzoo import aec_env

ROLES = ("sre", "oversight", "dev", "manager")
HELD_OUT = 1_000_000  # evaluation seeds start here; training seeds stay below


def features(observation: dict, agent: str) -> np.ndarray:
    """The view as one vector: scaled metrics, health one-hot, alerts, fleet,
    how far the episode is, and the role."""
    view = observation["observation"]
    metrics = view["metrics"] / np.array([100.0, 4000.0, 2000.0, 1.0, 10.0], dtype=np.float32)
    health = np.eye(5, dtype=np.float32)[view["health"]].ravel()
    step, limit = view["steps"]
    role = np.array([agent == r for r in ROLES], dtype=np.float32)
    return np.concatenate([metrics.ravel(), health, view["alerts"], view["fleet"],
                           [step / max(limit, 1.0)], role]).astype(np.float32)  # fmt: skip


class Policy(torch.nn.Module):
    def __init__(self, inputs: int, moves: int, width: int = 64) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(inputs, width), torch.nn.Tanh(), torch.nn.Linear(width, moves)
        )

    def distribution(self, x: np.ndarray, mask: np.ndarray) -> torch.distributions.Categorical:
        logits = self.net(torch.from_numpy(x))
        logits = logits.masked_fill(torch.from_numpy(mask == 0), float("-inf"))
        return torch.distributions.Categorical(logits=logits)


def play(env, seed: int, choose) -> tuple[list[tuple[str, object]], list[float], bool]:
    """One episode: each agent's (agent, chosen) in order, the reward after
    each of them, and whether it resolved."""
    env.reset(seed=seed)
    moves, rewards = [], []
    for agent in env.agent_iter():
        observation, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        chosen, action = choose(observation, agent)
        before = env.env.state.cumulative_reward
        env.step(action)
        moves.append((agent, chosen))
        rewards.append(env.env.state.cumulative_reward - before)
    return moves, rewards, env.env.state.resolved


def evaluate(env, policy: Policy | None, seeds: range) -> tuple[float, float]:
    """Success rate and mean return on ``seeds``: greedy, or random over the mask."""
    rng = np.random.default_rng(0)

    def choose(observation, agent):
        mask = observation["action_mask"]
        if policy is None:
            return None, int(rng.choice(np.flatnonzero(mask)))
        with torch.no_grad():
            probs = policy.distribution(features(observation, agent), mask).probs
        return None, int(probs.argmax())

    results = [play(env, seed, choose) for seed in seeds]
    returns = [sum(rewards) for _, rewards, _ in results]
    return sum(r for _, _, r in results) / len(results), float(np.mean(returns))


def train(args) -> dict:
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    env = aec_env(difficulty="easy")
    env.reset(seed=0)
    first = env.observe(env.agent_selection)
    policy = Policy(len(features(first, "sre")), len(first["action_mask"]))
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.lr)
    baseline = dict.fromkeys(ROLES, 0.0)
    held_out = range(HELD_OUT, HELD_OUT + args.eval_episodes)
    random_success, random_return = evaluate(env, None, held_out)
    curve = {"random": {"success": random_success, "return": random_return}, "points": []}
    print(f"random over the mask: success {random_success:.0%}, return {random_return:+.1f}")
    started, seeds = time.perf_counter(), random.Random(args.seed)

    def sample(observation, agent):
        dist = policy.distribution(features(observation, agent), observation["action_mask"])
        action = dist.sample()
        return dist.log_prob(action), int(action)

    for episode in range(args.episodes + 1):
        if episode % args.eval_every == 0 or episode == args.episodes:
            success, mean_return = evaluate(env, policy, held_out)
            wall = time.perf_counter() - started
            curve["points"].append({"episode": episode, "success": success,
                                    "return": mean_return, "seconds": wall})  # fmt: skip
            print(f"episode {episode}: success {success:.0%}, return {mean_return:+.1f} "
                  f"({wall:.0f} s)", flush=True)  # fmt: skip
        if episode == args.episodes:
            break
        moves, rewards, _ = play(env, seeds.randrange(HELD_OUT), sample)
        to_go = np.cumsum(rewards[::-1])[::-1]  # the team reward from each move on
        loss = 0.0
        for (agent, log_prob), value in zip(moves, to_go, strict=True):
            loss = loss - log_prob * (value - baseline[agent]) / 100.0
            baseline[agent] += 0.05 * (value - baseline[agent])
        optimizer.zero_grad()
        (loss / len(moves)).backward()
        optimizer.step()
    return curve


def plot(curve: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = curve["points"]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([p["episode"] for p in points], [p["success"] for p in points], marker="o",
            label="policy gradient (greedy), held-out seeds")  # fmt: skip
    ax.axhline(curve["random"]["success"], color="gray", linestyle="--", label="random over mask")
    ax.set_xlabel("training episodes")
    ax.set_ylabel("success rate, easy tier")
    ax.set_ylim(0, 1.05)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20_000, help="training episodes (20,000)")
    parser.add_argument("--eval-every", type=int, default=2000, help="episodes between evaluations")
    parser.add_argument("--eval-episodes", type=int, default=200, help="held-out episodes (200)")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", default=None, help="PNG of the curve")
    parser.add_argument("--json", default=None, help="the curve's points as JSON")
    args = parser.parse_args()
    curve = train(args)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(curve, out, indent=1)
    if args.plot:
        plot(curve, args.plot)


if __name__ == "__main__":
    main()
