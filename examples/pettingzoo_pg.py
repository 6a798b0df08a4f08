"""A masked policy-gradient baseline on ChaosOps' PettingZoo environment.

One small network plays all four roles (the role is an input), choosing among
the moves its action mask allows. It is trained with REINFORCE on every tier
and every failure type (each training episode draws a tier, and its seed draws
the failure): each agent's move is credited with the team reward that followed
it, less a per-role running baseline, plus an entropy bonus that keeps the
policy trying moves until the rare two-role fixes (a flag, then an escalation
or a rollback) are found. Every ``--eval-every`` episodes the greedy policy
plays held-out seeds (the training seeds never reach them) of each tier and
failure type, next to a random policy that samples the same masks. Needs
torch, the ``pettingzoo`` extra, and the ``plot`` extra for ``--plot``. Usage::

    python examples/pettingzoo_pg.py [--episodes 20000] [--seed 0] [--json pg.json] [--plot pg.png]
"""

from __future__ import annotations

import argparse
import json
import random
import time

import numpy as np
import torch

from chaosops.env.models import FailureType
from chaosops.train.pettingzoo import aec_env

ROLES = ("sre", "oversight", "dev", "manager")
TIERS = ("easy", "medium", "hard")
FAILURES = tuple(failure.value for failure in FailureType)
HELD_OUT = 1_000_000  # evaluation seeds start here; training seeds stay below
_SCALE = np.array([100.0, 4000.0, 2000.0, 1.0, 10.0], dtype=np.float32)  # cpu..replicas


def features(observation: dict, agent: str) -> np.ndarray:
    """The view as one vector: scaled metrics, health one-hot, alerts, log
    lines by service and level, fleet, how far the episode is, and the role."""
    view = observation["observation"]
    health = np.eye(5, dtype=np.float32)[view["health"]].ravel()
    step, limit = view["steps"]
    role = np.array([agent == r for r in ROLES], dtype=np.float32)
    parts = [(view["metrics"] / _SCALE).ravel(), health, view["alerts"],
             view["logs"].ravel() / 3.0, view["fleet"], [step / max(limit, 1.0)], role]  # fmt: skip
    return np.concatenate(parts).astype(np.float32)


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


def play(env, options: dict, seed: int, choose) -> tuple[list, list[float], bool]:
    """One episode: what ``choose`` returned for each move, in order, the
    reward after each move, and whether it resolved."""
    env.reset(seed=seed, options=options)
    chosen, rewards = [], []
    for agent in env.agent_iter():
        observation, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        note, action = choose(observation, agent)
        before = env.env.state.cumulative_reward
        env.step(action)
        chosen.append((agent, note))
        rewards.append(env.env.state.cumulative_reward - before)
    return chosen, rewards, env.env.state.resolved


def evaluate(env, policy: Policy | None, seeds: int) -> dict:
    """Success and mean return by tier and by failure type, over ``seeds``
    held-out seeds of each pair: greedy, or random over the mask."""
    rng = np.random.default_rng(0)

    def choose(observation, agent):
        mask = observation["action_mask"]
        if policy is None:
            return None, int(rng.choice(np.flatnonzero(mask)))
        with torch.no_grad():
            return None, int(policy.distribution(features(observation, agent), mask).probs.argmax())

    played = {(tier, failure): [play(env, {"difficulty": tier, "failure_type": failure},
                                     HELD_OUT + i, choose)[1:] for i in range(seeds)]
              for tier in TIERS for failure in FAILURES}  # fmt: skip
    return {"by_tier": {t: _figures(played, lambda k, t=t: k[0] == t) for t in TIERS},
            "by_failure": {f: _figures(played, lambda k, f=f: k[1] == f) for f in FAILURES},
            "all": _figures(played, lambda k: True)}  # fmt: skip


def _figures(played: dict, chosen) -> dict:
    episodes = [episode for key, runs in played.items() if chosen(key) for episode in runs]
    return {"success": float(np.mean([resolved for _, resolved in episodes])),
            "return": float(np.mean([sum(rewards) for rewards, _ in episodes]))}  # fmt: skip


def reinforce(policy, optimizer, baseline: dict, moves: list, rewards: list, entropy: float):
    """One REINFORCE step on an episode's moves, each credited with the team
    reward that followed it, less its role's running baseline."""
    to_go = np.cumsum(rewards[::-1])[::-1]
    loss = 0.0
    for (agent, (log_prob, spread)), value in zip(moves, to_go, strict=True):
        loss = loss - log_prob * (value - baseline[agent]) / 100.0 - entropy * spread
        baseline[agent] += 0.05 * (value - baseline[agent])
    optimizer.zero_grad()
    (loss / len(moves)).backward()
    optimizer.step()


def train(args) -> dict:
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    env = aec_env()
    env.reset(seed=0)
    first = env.observe(env.agent_selection)
    policy = Policy(len(features(first, "sre")), len(first["action_mask"]))
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.lr)
    baseline = dict.fromkeys(ROLES, 0.0)
    curve = {"seed": args.seed, "random": evaluate(env, None, args.eval_seeds), "points": []}
    print(f"random over the mask: {_line(curve['random'])}")
    started, draws = time.perf_counter(), random.Random(args.seed)

    def sample(observation, agent):
        dist = policy.distribution(features(observation, agent), observation["action_mask"])
        action = dist.sample()
        return (dist.log_prob(action), dist.entropy()), int(action)

    for episode in range(args.episodes + 1):
        if episode % args.eval_every == 0 or episode == args.episodes:
            wall = time.perf_counter() - started
            figures = evaluate(env, policy, args.eval_seeds)
            curve["points"].append({"episode": episode, "seconds": wall, **figures})
            print(f"episode {episode} ({wall:.0f} s): {_line(figures)}", flush=True)
        if episode == args.episodes:
            break
        options = {"difficulty": draws.choice(TIERS)}
        moves, rewards, _ = play(env, options, draws.randrange(HELD_OUT), sample)
        reinforce(policy, optimizer, baseline, moves, rewards, args.entropy)
    return curve


def _line(figures: dict) -> str:
    tiers = ", ".join(f"{t} {figures['by_tier'][t]['success']:.0%}" for t in TIERS)
    missed = [f for f in FAILURES if figures["by_failure"][f]["success"] < 1.0]
    return (f"success {figures['all']['success']:.0%} ({tiers}), return "
            f"{figures['all']['return']:+.1f}; not always resolved: "
            f"{', '.join(missed) or 'none'}")  # fmt: skip


def plot(curve: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = curve["points"]
    fig, ax = plt.subplots(figsize=(7, 4))
    for tier, style in zip(TIERS, ("o-", "s-", "^-"), strict=True):
        ax.plot([p["episode"] for p in points], [p["by_tier"][tier]["success"] for p in points],
                style, label=f"policy gradient (greedy), {tier}")  # fmt: skip
    ax.axhline(curve["random"]["all"]["success"], color="gray", linestyle="--",
               label="random over the mask")  # fmt: skip
    ax.set_xlabel("training episodes")
    ax.set_ylabel("success rate, held-out seeds, every failure type")
    ax.set_ylim(0, 1.05)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20_000, help="training episodes (20,000)")
    parser.add_argument("--eval-every", type=int, default=4000, help="episodes between evaluations")
    parser.add_argument("--eval-seeds", type=int, default=5,
                        help="held-out seeds a tier and failure (5: 135 episodes)")  # fmt: skip
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate")
    parser.add_argument("--entropy", type=float, default=0.05, help="entropy bonus (0.05)")
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
