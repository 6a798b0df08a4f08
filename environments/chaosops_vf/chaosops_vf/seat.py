"""The harness of a ChaosOps seat: one chat completion a turn, in process.

verifiers' harnesses launch a program (the built-in ``null`` chat loop is a
uv script that ``uv sync`` installs at run time). A seat needs no program: it
answers one view with one model call. So this harness runs its loop in
process, which verifiers allows as long as every model call goes through the
rollout's interception ``endpoint`` (the call lands on the trace, with its
tokens). A turn sends what ``chaosops run --policy llm`` sends: the role's
system prompt and the newest view, not the growing conversation.
"""

from __future__ import annotations

from typing import Any, cast

import verifiers.v1 as vf
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam

__all__ = ["ChaosOpsSeat", "ChaosOpsSeatConfig"]


class ChaosOpsSeatConfig(vf.HarnessConfig):
    pass


def _newest_view(prompt: Any) -> list[dict[str, Any]]:
    """The user messages after the conversation's last answer."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    messages = list(prompt or [])
    answered = [i for i, m in enumerate(messages) if m.role == "assistant"]
    newest = messages[answered[-1] + 1 :] if answered else messages
    return [{"role": "user", "content": m.content} for m in newest if m.role == "user"]


class ChaosOpsSeat(vf.Harness[ChaosOpsSeatConfig]):
    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True  # each turn relaunches on the conversation: we read its newest view
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
    ) -> vf.ProgramResult:
        system, prompt = self.resolve_prompt(data)
        messages = ([{"role": "system", "content": system}] if system else []) + _newest_view(
            prompt
        )
        sampling = ctx.sampling.model_dump(exclude_none=True) if ctx.sampling else {}
        async with AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=0) as client:
            chat = cast("list[ChatCompletionMessageParam]", messages)  # system and user texts
            await client.chat.completions.create(model=ctx.model, messages=chat, **sampling)
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")
