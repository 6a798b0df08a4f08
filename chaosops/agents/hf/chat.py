"""A role's chat of one episode as the model's own tokens: what
``--hf-conversation episode`` plays, and what a trainer's rollout trains on.

The chat opens with :class:`~chaosops.agents.conversation.Conversation`'s
messages rendered by the chat template. Then each answer is kept as the model
sampled it (its tokens, the stop token included, and their log-probabilities:
the model's own, mask 1), and each tool answer as the template renders it
after that answer (the world's, mask 0). Every turn's prompt is the whole
chat so far, so the sequence a trainer scores is exactly what the model saw
and said.
"""

from __future__ import annotations

from typing import Any

from chaosops.agents.conversation import Conversation
from chaosops.env.models import AgentRole, ChaosOpsAction, ChaosOpsObservation

from .local import Generation, HFModelError, LocalModel, Prompt

__all__ = ["TokenChat"]


class TokenChat:
    """One role's turns of one episode, as tokens (see the module)."""

    def __init__(self, local: LocalModel, role: AgentRole, tools: list[dict[str, Any]]) -> None:
        self.local, self.tools = local, tools
        self.conversation = Conversation(role)
        self.prompt_ids: tuple[int, ...] = ()  # the opening, up to the first answer
        self.completion_ids: list[int] = []  # everything after it
        self.mask: list[int] = []  # 1: a token the model sampled; 0: the world's
        self.logprobs: list[float] = []  # the model's tokens' own; 0.0 for the world's

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.conversation.messages

    def prompt(self, obs: ChaosOpsObservation) -> Prompt:
        """The turn's prompt: the chat so far, ending with what the role sees now."""
        messages = self.conversation.prompt(obs)
        if not self.prompt_ids:
            self.prompt_ids = self.local.encode(self.local.render(messages, self.tools, True))
        else:
            self._add(self._world_tokens(messages), own=False)
        ids = self.prompt_ids + tuple(self.completion_ids)
        return Prompt(ids, self.local.shared(messages, self.tools, ids), logprobs=True)

    def answered(
        self, answer: Generation, action: ChaosOpsAction, refused: str | None = None
    ) -> None:
        """The model said ``answer``; the turn played ``action`` (``refused``: why
        the answer was no move, and the fallback played)."""
        self._add(list(answer.ids), own=True, logprobs=answer.logprobs)
        eos = self.local.tokenizer.eos_token_id
        if eos is not None and (not answer.ids or answer.ids[-1] != eos):
            self._add([eos], own=False)  # a cut answer: the chat closes it
        self.conversation.answered(action, refused)

    def _world_tokens(self, messages: list[dict[str, Any]]) -> list[int]:
        """The tokens the template puts between the last answer and the next one."""
        before = self.local.render(messages[:-1], self.tools, False)
        after = self.local.render(messages, self.tools, True)
        if not after.startswith(before):
            raise HFModelError(
                f"{self.local.settings.model}: the chat template renders a chat differently "
                "once it grows; conversation 'episode' needs one that only appends"
            )
        eos = self.local.tokenizer.eos_token or ""
        tail = before[before.rfind(eos) + len(eos) :] if eos and eos in before else ""
        return list(self.local.encode(tail + after[len(before) :]))

    def _add(self, ids: list[int], own: bool, logprobs: Any = None) -> None:
        self.completion_ids += ids
        self.mask += [int(own)] * len(ids)
        given = list(logprobs) if own and logprobs is not None else []
        self.logprobs += given + [0.0] * (len(ids) - len(given))
