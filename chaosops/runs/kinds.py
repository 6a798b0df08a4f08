"""The kinds of model a policy can play, each declared once.

A kind is an OpenAI-compatible endpoint (``llm``) or a checkpoint played in
this process (``hf``). Its :class:`ModelKind` says what its settings are
(the run file's ``[KIND.NAME]`` tables hold their fields), what run.json and
summary.json record of each model of the kind and under which key, which
settings a resumed run must match, what the results say of a role it plays,
and how its models are made ready before any episode. The flags of the
kind's own model (the policy named as the kind) are the options that set
its fields (:attr:`chaosops.runs.options.Option.sets`).

Its policy follows :class:`chaosops.agents.model.ModelPolicy` and its
settings :class:`~chaosops.agents.model.ModelSettings`; nothing else of them
is read by name. ``build`` says how a Ray worker makes the policy from its
settings (``share``: the settings one of N workers gets), or ``not_on_ray``
why it cannot.

A new kind is its settings and policy (under ``chaosops.agents``), an entry
in :data:`KINDS`, and its options: docs/architecture.md, "Adding a policy kind".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from chaosops.agents.hf.settings import HFSettings
from chaosops.agents.llm.settings import LLMSettings
from chaosops.agents.model import ModelPolicy

from .errors import Message, Named
from .models import prepare_hf, prepare_llms

Prepare = Callable[[Mapping[str, Any], str | None, float | None], dict[str, Any]]
"""(models by policy name, the run file, seconds a probe may take) -> their policies."""

Build = Callable[[Any], ModelPolicy]
"""settings -> the model's policy, as a Ray worker makes it (nothing probed)."""


@dataclass(frozen=True, slots=True)
class ModelKind:
    """One kind of model policy (see the module's text)."""

    name: str  # the policy name of the flags' own model, and the run file's table
    noun: str  # one such model, in messages: "an LLM"
    settings: type  # its settings, a validated dataclass: the tables' keys are its fields
    recorded: str  # the key of run.json and summary.json: policy name -> settings
    decides: tuple[str, ...]  # the settings a resumed run must match
    prepare: Prepare  # its models' policies, made ready before any episode
    record: Callable[[Any], dict[str, Any]] = dataclasses.asdict  # what the records hold
    player: Callable[[Any], dict[str, Any]] = lambda settings: {}  # results: beyond model, answer
    own: Callable[[dict[str, Any]], Any] = lambda given: None  # the flags' own model, or None
    build: Build | None = None  # how a Ray worker makes its policy; None: not on Ray
    share: Callable[[Any, int], Any] = lambda settings, workers: settings  # per worker
    not_on_ray: Message | None = None  # why its policies cannot play in Ray workers (build None)


def _llm_record(settings: LLMSettings) -> dict[str, Any]:
    """Every field but the key (``api_key_env`` names where it is read from)."""
    fields = dataclasses.asdict(settings)
    del fields["api_key"]
    fields["extra_body"] = dict(settings.extra_body) if settings.extra_body else None
    return fields


def _llm_own(given: dict[str, Any]) -> LLMSettings:
    # --llm-top-logprobs implies --llm-logprobs (servers refuse it alone)
    given["logprobs"] = given.get("logprobs") or given.get("top_logprobs") is not None
    return LLMSettings(**given)


def _llm_policy(settings: LLMSettings) -> ModelPolicy:
    from chaosops.agents.llm.policy import LLMPolicy  # aiohttp: loaded when an LLM plays

    return LLMPolicy.from_settings(settings)


def _llm_share(settings: LLMSettings, workers: int) -> LLMSettings:
    """The settings of one of ``workers``: the in-flight limit shared out among them."""
    return dataclasses.replace(settings, max_in_flight=max(1, settings.max_in_flight // workers))


def _hf_player(settings: HFSettings) -> dict[str, Any]:
    device = settings.resolved_device or settings.device
    return {"weights": settings.weights, "dtype": settings.dtype, "device": device}


def _hf_own(given: dict[str, Any]) -> HFSettings | None:
    return None if given.get("model") is None else HFSettings(**given)


# a resumed run asks the same endpoint the same way, and plays the same weights
# the same way (the device aside: a run may move machines)
KINDS: tuple[ModelKind, ...] = (
    ModelKind(
        "llm", "an LLM", LLMSettings, "llms",
        ("base_url", "model", "temperature", "top_p", "seed", "max_tokens", "answer", "history",
         "system_prompt"),
        prepare_llms, record=_llm_record, own=_llm_own, build=_llm_policy, share=_llm_share,
    ),
    ModelKind(
        "hf", "a local model", HFSettings, "hf",
        ("model", "weights", "dtype", "temperature", "top_p", "seed", "max_new_tokens", "answer",
         "system_prompt", "conversation"),
        prepare_hf, player=_hf_player, own=_hf_own,
        not_on_ray=Message(
            "batches its turns in this process's model; drop ", Named("ray"), ", or serve the "
            "model behind an endpoint for ", Named("policy", "llm"),
        ),
    ),
)  # fmt: skip

KIND_NAMES = tuple(kind.name for kind in KINDS)
"""The policy names of the kinds' own models (``llm``, ``hf``)."""


def kind_named(name: str) -> ModelKind:
    """The kind called ``name`` (KeyError when there is none)."""
    for kind in KINDS:
        if kind.name == name:
            return kind
    raise KeyError(name)


def kind_of(settings: Any) -> ModelKind:
    """The kind whose settings ``settings`` are."""
    return next(kind for kind in KINDS if isinstance(settings, kind.settings))


def ray_refusal(name: str, settings: Any) -> Message | None:
    """Why the model ``name`` cannot play in Ray workers, or None when its kind builds there."""
    kind = kind_of(settings)
    if kind.build is not None:
        return None
    return Message(Named("ray"), f": the {name} policy ", kind.not_on_ray or "")
