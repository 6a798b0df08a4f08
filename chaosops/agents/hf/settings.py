"""The local model policy's settings, in one frozen, validated dataclass: the
command's ``--hf-*`` flags and a run file's ``[hf.NAME]`` tables are read
through these fields (their types, bounds and defaults are declared here once)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import Field
from pydantic.dataclasses import dataclass

Dtype = Literal["auto", "float32", "bfloat16", "float16"]
DTYPES: tuple[str, ...] = get_args(Dtype)

HFAnswer = Literal["auto", "tools", "json"]
"""How the model is asked to answer: a call of the ``take_action`` tool, whose
schema the chat template renders into the prompt; a JSON object the prompt
describes; or ``auto``: tools when the model's chat template renders tools."""


HFConversation = Literal["turn", "episode"]
"""What a turn's prompt is: ``turn``, the runtime's own (the view rendered
afresh each turn, one ``take_action`` tool or a JSON answer); ``episode``,
the trainer's (one growing chat of tool calls per role and episode, as
:mod:`chaosops.agents.conversation` builds it and GRPO's rollouts hold it)."""


def _between(low: float, high: float) -> Any:
    return Field(ge=low, le=high, allow_inf_nan=False)


@dataclass(frozen=True, slots=True)
class HFSettings:
    """How :class:`~chaosops.agents.hf.HFPolicy` loads and asks its model.

    ``model`` is a folder of a transformers checkpoint or a hub name, loaded
    with ``dtype`` on ``device`` (``cpu``, ``cuda``, ``cuda:N``, ``mps`` or
    ``auto``: the first accelerator, else the CPU). ``batch`` turns pending
    across episodes share one ``generate`` call, gathered for at most
    ``batch_wait_ms`` after the first. ``conversation`` is the prompts' format
    (:data:`HFConversation`). ``temperature`` 0 is greedy decoding;
    ``max_new_tokens`` bounds an answer. ``weights`` (a hash of the weights'
    files), ``resolved_device`` and ``settled`` (the answer format ``auto``
    chose) are filled in once the model is loaded, for the run's records.
    """

    model: Annotated[str, Field(min_length=1)]
    dtype: Dtype = "auto"
    device: Annotated[str, Field(min_length=1)] = "auto"
    temperature: Annotated[float, _between(0.0, 2.0)] = 0.0
    top_p: Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)] | None = None
    max_new_tokens: Annotated[int, _between(1, 1_000_000)] = 256
    seed: int | None = None
    batch: Annotated[int, _between(1, 4096)] = 16
    batch_wait_ms: Annotated[float, _between(0.0, 10_000.0)] = 5.0
    answer: HFAnswer = "auto"
    system_prompt: Literal["system", "user"] = "system"
    conversation: HFConversation = "turn"
    weights: str | None = None
    resolved_device: str | None = None
    settled: Literal["tools", "json"] | None = None

    def __post_init__(self) -> None:
        # the episode's chat is the trainer's, system message and tools included
        defaults = (self.system_prompt, self.answer) == ("system", "auto")
        if self.conversation == "episode" and not defaults:
            raise ValueError(
                "conversation 'episode' is the trainers' chat, with its own system message "
                "and tool calls: system_prompt and answer keep their defaults there "
                f"(got system_prompt={self.system_prompt!r}, answer={self.answer!r})"
            )

    @property
    def answer_format(self) -> str | None:
        """The format asked for: ``answer``, or for ``auto`` the one settled."""
        return self.settled if self.answer == "auto" else self.answer
