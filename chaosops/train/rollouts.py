"""GRPO's rollouts played by the runtime: TRL's ``rollout_func`` (experimental in TRL 1.16).

``GRPOTrainer(..., rollout_func=RuntimeRollouts(...))`` hands each batch's
prompts to :class:`RuntimeRollouts`; a prompt names a row (a scenario and
the role whose chat is its completion: :meth:`RuntimeRollouts.rows` makes
them). The batch's episodes are then played concurrently by the runtime,
exactly as ``chaosops run --policy hf --hf-conversation episode`` plays
them: the model being trained plays every seat of ``roles``, its turns batched
across episodes into one ``generate`` call, each turn under ``turn_timeout``
with the runtime's fallback; ``others`` play the other roles; the judge reads
every answer. Each episode's chat for the row's role comes back as TRL needs
it: the prompt's tokens, the completion's (every answer and every tool
answer after it), each answer token's sampling log-probability, and
``env_mask``, which keeps the tool answers out of the loss. With ``out``,
each batch's episodes are written to a run folder of its own (``step-N``
under ``out``, N the trainer's step when they were played), which ``chaosops
view``, ``episodes`` and ``transcript`` open: each turn the model played says
which version of the policy played it (``played_by``: ``model@step-N``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import actors
from chaosops.agents.conversation import opening_prompt, tool_schemas
from chaosops.agents.hf import HFPolicy
from chaosops.agents.hf.policy import EpisodeChat
from chaosops.agents.policies import Others, policies_for
from chaosops.agents.runner import run_batch
from chaosops.env.models import AgentRole
from chaosops.env.results import EpisodeResult
from chaosops.env.world_sim import Scenario
from chaosops.outputs import RunOutputs, plan_keys
from chaosops.scenarios import choose_scenario
from chaosops.summary import summarise

from .trl import Outcome, fallback_return, repaid

__all__ = ["RuntimeRollouts"]

_HANDLE = re.compile(r"^chaosops:(\w+)/(\w+)/seed=(-?\d+)/steps=(\d+)/role=(\w+)$")


@dataclasses.dataclass
class _Played:
    """One rollout: its scenario, the role whose chat it returns, and its chats."""

    scenario: Scenario
    role: AgentRole
    chat: EpisodeChat | None = None


class RuntimeRollouts:
    """TRL's ``rollout_func`` (see the module). ``roles``: the seats the model
    plays (one, several, or all four); ``others``: the other roles' policies,
    as :class:`~chaosops.train.trl.ChaosOpsToolEnv` takes them.
    ``settings`` go to :class:`~chaosops.agents.hf.HFSettings`
    (``temperature``, ``max_new_tokens``, ``batch``...), its conversation
    always ``episode``."""

    def __init__(
        self,
        roles: Iterable[str] = ("sre",),
        *,
        others: Others = "heuristic",
        turn_timeout: float | None = None,
        concurrency: int = 64,
        out: str | Path | None = None,
        **settings: Any,
    ) -> None:
        self.roles = frozenset(AgentRole(role) for role in roles)
        if not self.roles:
            raise ValueError("roles=(): the model plays at least one role")
        if settings.get("conversation", "episode") != "episode":
            raise ValueError("conversation: a rollout is one chat per role and episode ('episode')")
        self.others, self.turn_timeout, self.concurrency = others, turn_timeout, concurrency
        self.out = None if out is None else Path(out)
        self.settings = {"temperature": 1.0, "max_new_tokens": 128, **settings,
                         "conversation": "episode"}  # fmt: skip

    @staticmethod
    def prompt_of(scenario: Scenario, role: AgentRole | str) -> str:
        """The prompt naming a row: its scenario and role (a handle the model
        never sees: its chat is the runtime's)."""
        return (
            f"chaosops:{scenario.failure_type}/{scenario.difficulty}/seed={scenario.seed}"
            f"/steps={scenario.max_steps}/role={AgentRole(role).value}"
        )

    def rows(self, scenarios: Iterable[Scenario], role: AgentRole | str) -> list[dict[str, Any]]:
        """The dataset rows of ``scenarios`` for ``role``'s chat: a ``prompt`` each."""
        if AgentRole(role) not in self.roles:
            raise ValueError(f"role={role!r}: a row's role is one the model plays ({self._roles})")
        return [{"prompt": self.prompt_of(scenario, role)} for scenario in scenarios]

    @property
    def _roles(self) -> str:
        return ", ".join(sorted(role.value for role in self.roles))

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list[Any]]:
        """Play one episode per prompt; what TRL reads of each (see the module)."""
        played = [self._row(prompt) for prompt in prompts]
        # the trainer's step names the policy's version (a stand-in trainer may have none)
        version = f"step-{getattr(getattr(trainer, 'state', None), 'global_step', 0)}"
        policy = HFPolicy.from_model(trainer.model, trainer.processing_class, **self.settings)
        try:
            results = self._play(played, policy, f"model@{version}")
        finally:
            policy.close()
        if self.out is not None:
            self._write(self.out / version, played, results)
        return self._output(played, results, trainer.processing_class)

    def _write(self, folder: Path, played: list[_Played], results: list[EpisodeResult]) -> None:
        """The batch's episodes as a run folder: results, trajectories, summary."""
        keys = plan_keys("rollouts", [p.scenario for p in played])  # a group's: #0, #1...
        roles = {role.value: {"policy": "rollouts" if role in self.roles else str(self.others),
                              "model": "model" if role in self.roles else None}
                 for role in AgentRole}  # fmt: skip
        with RunOutputs(folder, keys=keys) as outputs:
            records = [
                outputs.write_episode(
                    result, policy="rollouts", key=key, roles=roles, turn_timeout=self.turn_timeout
                )
                for key, result in zip(keys, results, strict=True)
            ]
            outputs.write_summary(summarise(records, keys, played=roles).data)

    def _row(self, prompt: Any) -> _Played:
        text = prompt if isinstance(prompt, str) else str(prompt[-1]["content"])
        found = _HANDLE.match(text)
        if found is None:
            raise ValueError(
                f"prompt {text[:80]!r} names no row: RuntimeRollouts.rows() makes the dataset"
            )
        failure, tier, seed, steps, role = found.groups()
        scenario = choose_scenario(failure_type=failure, difficulty=tier, seed=int(seed),
                                   max_steps=int(steps))  # fmt: skip
        return _Played(scenario, AgentRole(role))

    def _play(self, played: list[_Played], policy: HFPolicy, version: str) -> list[EpisodeResult]:
        # each rollout its own scenario object, so that its chats are found again
        by_id = {id(p.scenario): p for p in played}

        def players(scenario: Scenario) -> Mapping[AgentRole | str, Any]:
            rollout = by_id[id(scenario)]
            chat = policy.for_episode()
            assert isinstance(chat, EpisodeChat), "the settings' conversation is 'episode'"
            rollout.chat = chat
            others = policies_for(self.others, scenario)
            players: dict[AgentRole | str, Any] = {role: p for role, p in others.items()}
            versioned = _Versioned(chat, version)
            players.update(dict.fromkeys(self.roles, versioned))  # a role in neither plays noop
            return players

        return run_batch([p.scenario for p in played], players, concurrency=self.concurrency,
                         turn_timeout=self._deadlines())  # fmt: skip

    def _deadlines(self) -> dict[AgentRole | str, float | None] | None:
        if self.turn_timeout is None:
            return None
        return {role: self.turn_timeout for role in AgentRole}

    def _output(
        self, played: list[_Played], results: list[EpisodeResult], tokenizer: Any
    ) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {key: [] for key in _KEYS}
        for rollout, result in zip(played, results, strict=True):
            chat = rollout.chat.chats.get(rollout.role) if rollout.chat is not None else None
            fields: tuple[Sequence[Any], ...] = (
                (chat.prompt_ids, chat.completion_ids, chat.logprobs, chat.mask)
                if chat is not None
                else _no_turn(rollout.role, tokenizer)
            )
            for key, value in zip(_KEYS, fields, strict=False):
                out[key].append(list(value))
            out["outcome"].append(self._score(rollout, result))
        return out

    def _score(self, rollout: _Played, result: EpisodeResult) -> Outcome:
        """A rollout's outcome, as the tool environment scores one."""
        own = [s for s in result.steps if s.role == rollout.role]
        legal = sum(not (s.timed_out or s.error or s.info.get("parse_error")) for s in own)
        team = result.cumulative_reward - repaid(result)
        credit = team  # with the model in other seats too, there is no counterfactual
        if self.roles == {rollout.role}:
            baseline = fallback_return(self.others, rollout.scenario, rollout.role)
            credit -= baseline if baseline is not None else 0.0
        return Outcome(team_return=team, credit=credit,
                       legal_share=legal / len(own) if own else 0.0,
                       resolved=result.resolved, fallback_turns=len(own) - legal)  # fmt: skip


def _no_turn(
    role: AgentRole, tokenizer: Any
) -> tuple[list[Any], list[Any], list[float], list[int]]:
    """A row whose role got no turn (the episode ended first): its opening chat,
    and one end-of-turn token masked out of the loss, as TRL needs a token."""
    system, _ = opening_prompt(role)
    prompt = tokenizer.apply_chat_template(
        [system], tools=tool_schemas(), tokenize=True, add_generation_prompt=True, return_dict=True
    )
    return list(prompt["input_ids"]), [tokenizer.eos_token_id], [0.0], [0]


_KEYS = ("prompt_ids", "completion_ids", "logprobs", "env_mask", "outcome")


class _Versioned:
    """A seat's policy whose every turn records the version that played it."""

    def __init__(self, policy: Any, version: str) -> None:
        self.policy, self.version = policy, version

    async def __call__(self, observation: Any, role: Any) -> Any:
        actors.current_turn().annotate(played_by=self.version)
        return await self.policy(observation, role)
