"""A transformers checkpoint loaded in this process: its chat template, and
batches of prompts generated with left padding.

Loading checks what a run needs before any episode starts (the device, the
checkpoint, a chat template) and says what is wrong in one line
(:class:`HFModelError`). torch and transformers are imported here only: the
``hf`` extra (torch installed first, as docs/training.md says).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from chaosops._extras import require
from chaosops.agents.llm.parse import action_tool

from .settings import HFSettings

__all__ = ["Generation", "HFModelError", "LocalModel", "Prompt", "weights_hash"]

WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt", "*.pth")
"""The files a checkpoint's weights are in (what its hash reads)."""

_PROBE = ({"role": "user", "content": "probe"},)
_KEPT = 16  # system messages whose tokens, and keys and values, are kept
_MIN_SHARED = 32  # a shorter system message is not worth a cached prefix


class HFModelError(ValueError):
    """The model cannot be loaded or played as asked (one line: what and why)."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """A turn's prompt as tokens; its first ``shared`` are the system message's.
    ``logprobs``: the answer's tokens' log-probabilities are wanted (a trainer's)."""

    ids: tuple[int, ...]
    shared: int
    logprobs: bool = False


@dataclass(frozen=True, slots=True)
class Generation:
    """One prompt's answer: its text, token counts, and whether it hit the limit;
    ``ids``, the tokens generated (the stop token included), and when asked
    for, each one's log-probability under the sampling temperature."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cut: bool
    ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] | None = None


class LocalModel:
    """A causal LM and its tokenizer, in evaluation mode while it generates.

    Built by :meth:`load` from a checkpoint, or from objects in memory (a
    model being trained: its mode is restored after each batch).
    """

    def __init__(self, model: Any, tokenizer: Any, settings: HFSettings) -> None:
        self.torch = require("torch", "hf", "the hf policy")
        self.transformers = require("transformers", "hf", "the hf policy")
        _check_template(tokenizer, settings)
        tokenizer.padding_side = "left"  # the answers of a batch start at one column
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.model, self.tokenizer = model, tokenizer
        self.device = str(next(model.parameters()).device)
        # the system messages' tokens (the loop's) and keys and values (the thread's)
        self._heads: OrderedDict[bytes, tuple[int, ...]] = OrderedDict()
        self._prefixes: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self.renders_tools = _renders_tools(tokenizer)
        answer = settings.answer if settings.answer != "auto" else None
        if answer == "tools" and not self.renders_tools:
            raise HFModelError(
                f"{settings.model}: answer 'tools', but the chat template does not render "
                "tools; answer 'json' or 'auto'"
            )
        settled = answer or ("tools" if self.renders_tools else "json")
        self.settings = dataclasses.replace(settings, resolved_device=self.device, settled=settled)

    @classmethod
    def load(cls, settings: HFSettings) -> LocalModel:
        """The checkpoint ``settings.model`` on its device; :class:`HFModelError` when
        the device does not exist, the path holds no model, or it has no chat template."""
        torch = require("torch", "hf", "the hf policy")
        transformers = require("transformers", "hf", "the hf policy")
        device = _device(torch, settings.device)
        name = settings.model
        folder = _local_folder(name)  # a hub name is read from the cache's copy
        transformers.utils.logging.disable_progress_bar()  # the run's output is one line a fault
        local = {"local_files_only": True}  # a folder, or the hub's cache: never the network
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(folder, **local)
            _check_template(tokenizer, settings)  # before the weights: the cheaper refusal
            model = transformers.AutoModelForCausalLM.from_pretrained(
                folder, dtype=settings.dtype, **local
            )
        except HFModelError:
            raise
        except Exception as exc:  # a damaged file raises the reader's own (safetensors') error
            raise HFModelError(f"{name}: no causal language model loads from it ({_short(exc)})"
                               ) from None  # fmt: skip
        model.to(device)
        if settings.seed is not None:
            torch.manual_seed(settings.seed)
        loaded = cls(model, tokenizer, settings)
        loaded.settings = dataclasses.replace(loaded.settings, weights=weights_hash(name))
        return loaded

    def prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Prompt:
        """The chat template's tokens of ``messages`` (with ``tools`` offered),
        ready to answer, and how many of them the system message's rendering takes."""
        ids = self.encode(self.render(messages, tools, answer=True))
        return Prompt(ids, self.shared(messages, tools, ids))

    def shared(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, ids: Any
    ) -> int:
        """How many of ``ids`` (a prompt of ``messages``) the system message's rendering takes."""
        head = self._head(messages[0], tools) if messages[0]["role"] == "system" else ()
        return len(head) if tuple(ids[: len(head)]) == head else 0

    def _head(self, system: dict[str, Any], tools: list[dict[str, Any]] | None) -> tuple[int, ...]:
        """The tokens of the system message alone (with the tools the template puts there)."""
        key = orjson.dumps([system, tools])
        if (head := self._heads.get(key)) is None:
            text = self.tokenizer.apply_chat_template([system], tools=tools, tokenize=False)
            head = tuple(self.tokenizer(str(text), add_special_tokens=False)["input_ids"])
            self._heads[key] = head
            while len(self._heads) > _KEPT:
                self._heads.popitem(last=False)
        return head

    def generate(self, prompts: list[Prompt]) -> list[Generation]:
        """One answer per prompt, from one ``generate`` call. Each prompt's
        system message starts from its keys and values, computed once and kept
        (a role's turns share them); only the rest of the prompt is computed."""
        training = self.model.training
        self.model.eval()
        try:
            with self.torch.inference_mode():
                return self._generate(prompts)
        finally:
            self.model.train(training)

    def _generate(self, prompts: list[Prompt]) -> list[Generation]:
        """Each prompt but its last token is computed alone (no padding to
        mask), from its system message's kept keys and values; then the batch
        decodes together, each row right-aligned behind left padding."""
        torch, s, pad = self.torch, self.settings, self.tokenizer.pad_token_id
        room = max(len(p.ids) for p in prompts) - 1
        rows = [[pad] * (room + 1 - len(p.ids)) + list(p.ids) for p in prompts]
        mask = [[0] * (room + 1 - len(p.ids)) + [1] * len(p.ids) for p in prompts]
        extra: dict[str, Any] = {"do_sample": bool(s.temperature)}
        if s.temperature:
            extra.update(temperature=s.temperature, top_p=s.top_p or 1.0)
        scored = any(p.logprobs for p in prompts)
        out = self.model.generate(
            input_ids=torch.tensor(rows, device=self.device),
            attention_mask=torch.tensor(mask, device=self.device),
            cache=self._cache([self._alone(p) for p in prompts], room, room + 1 + s.max_new_tokens),
            max_new_tokens=s.max_new_tokens, pad_token_id=pad, return_dict_in_generate=True,
            output_logits=scored, **extra,
        )  # fmt: skip
        answers = out.sequences[:, room + 1 :]
        logprobs = self._logprobs(out.logits, answers) if scored else [None] * len(prompts)
        return [self._read(row.tolist(), len(p.ids), lp)
                for row, p, lp in zip(answers, prompts, logprobs, strict=True)]  # fmt: skip

    def _logprobs(self, logits: Any, answers: Any) -> list[list[float]]:
        """Each generated token's log-probability under the sampling temperature
        (the raw logits scaled by it, as a trainer scores them)."""
        scale = self.settings.temperature or 1.0
        steps = self.torch.stack(logits, dim=1).float() / scale  # rows x tokens x vocab
        chosen = self.torch.log_softmax(steps, dim=-1).gather(-1, answers[:, :, None])
        return chosen[:, :, 0].tolist()

    def _alone(self, prompt: Prompt) -> Any:
        """The keys and values of the prompt but its last token, for one row."""
        head = prompt.ids[: prompt.shared] if prompt.shared >= _MIN_SHARED else ()
        cache = copy.deepcopy(self._prefix(head)) if head else None
        rest = prompt.ids[len(head) : -1]
        if rest or cache is None:
            ids = self.torch.tensor([rest], device=self.device)
            cache = self.model(input_ids=ids, cache=cache, use_cache=True).cache
        return cache

    def _cache(self, alone: list[Any], room: int, length: int) -> Any:
        """A cache of ``length`` positions a row, preallocated (a growing cache
        copies itself at every token), holding each row's keys and values
        computed alone, right-aligned in the first ``room`` positions."""
        cache = self.transformers.StaticCache(config=self.model.config, max_cache_len=length)
        for index, first in enumerate(alone[0].layers):
            shape = (len(alone), first.keys.shape[1], room)
            keys = first.keys.new_zeros((*shape, first.keys.shape[3]))
            values = first.values.new_zeros((*shape, first.values.shape[3]))
            for row, own in enumerate(alone):
                layer = own.layers[index]
                keys[row, :, room - layer.keys.shape[2] :] = layer.keys[0]
                values[row, :, room - layer.values.shape[2] :] = layer.values[0]
            cache.update(keys, values, index)
        return cache

    def _prefix(self, shared: tuple[int, ...]) -> Any:
        """The keys and values of ``shared`` (one row), computed once and kept."""
        if (cache := self._prefixes.get(shared)) is None:
            ids = self.torch.tensor([shared], device=self.device)
            cache = self.model(input_ids=ids, use_cache=True).cache
            self._prefixes[shared] = cache
            while len(self._prefixes) > _KEPT:
                self._prefixes.popitem(last=False)
        return cache

    def _read(
        self, ids: list[int], prompt_tokens: int, logprobs: list[float] | None = None
    ) -> Generation:
        stops = {self.tokenizer.eos_token_id, self.tokenizer.pad_token_id} - {None}
        stopped = next((i for i, t in enumerate(ids) if t in stops), None)
        answer = ids if stopped is None else ids[:stopped]
        said = ids if stopped is None else ids[: stopped + 1]  # the stop token is the model's
        text = self.tokenizer.decode(answer, skip_special_tokens=True)
        cut = stopped is None and len(ids) >= self.settings.max_new_tokens
        kept = None if logprobs is None else tuple(logprobs[: len(said)])
        return Generation(text, prompt_tokens, len(answer), cut, tuple(said), kept)

    def render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, answer: bool
    ) -> str:
        """The chat template's text of ``messages``; ``answer``: ready for the model's."""
        text = self.tokenizer.apply_chat_template(
            messages, tools=tools, tokenize=False, add_generation_prompt=answer
        )
        return str(text)

    def encode(self, text: str) -> tuple[int, ...]:
        return tuple(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def _local_folder(name: str) -> str:
    """The folder a checkpoint loads from: ``name`` itself, or for a hub name its
    copy in the local hub cache (nothing is downloaded: the hub is never asked).
    One line for what is neither."""
    path = Path(name)
    if path.is_file():
        raise HFModelError(
            f"{name} is a file; give the checkpoint's folder (the one holding config.json)"
        )
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise HFModelError(f"{name}: the folder holds no config.json: no checkpoint")
        return name
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise HFModelError(f"{name}: no such folder")
    hub = require("huggingface_hub", "hf", "the hf policy")
    try:
        cached = hub.try_to_load_from_cache(name, "config.json")
    except ValueError:  # no repository id
        cached = None
    if not isinstance(cached, str):
        raise HFModelError(
            f"{name}: neither a folder here nor a model in the local hub cache (nothing is "
            "downloaded: fetch it first, or give the checkpoint's folder)"
        )
    return str(Path(cached).parent)


def _check_template(tokenizer: Any, settings: HFSettings) -> None:
    if getattr(tokenizer, "chat_template", None) is None:
        raise HFModelError(
            f"{settings.model}: the tokenizer has no chat template; the hf policy sends "
            "chat messages (set tokenizer.chat_template, or use an instruction-tuned model)"
        )


def _renders_tools(tokenizer: Any) -> bool:
    """Whether the chat template writes offered tools into the prompt."""
    try:
        plain = tokenizer.apply_chat_template(list(_PROBE), tokenize=False)
        tool = action_tool({"type": "object", "properties": {}})
        offered = tokenizer.apply_chat_template(list(_PROBE), tools=[tool], tokenize=False)
    except Exception:  # a template that fails on tools does not render them
        return False
    return bool(offered != plain)


def _device(torch: Any, name: str) -> str:
    """``name`` as a device this machine has (``auto``: an accelerator, else the CPU)."""
    if name == "auto":
        if torch.cuda.is_available():
            return "cuda"
        mps = getattr(torch.backends, "mps", None)
        return "mps" if mps is not None and mps.is_available() else "cpu"
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise HFModelError(f"device {name!r} is no device; expected cpu, cuda, cuda:N, "
                           "mps or auto") from None  # fmt: skip
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (device.index or 0) >= count:
            raise HFModelError(f"device {name!r}: this machine has {count} CUDA device(s)")
    elif device.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise HFModelError(f"device {name!r}: MPS is not available on this machine")
    elif device.type != "cpu":
        raise HFModelError(f"device {name!r}: expected cpu, cuda, cuda:N, mps or auto")
    return name


def weights_hash(model: str) -> str | None:
    """SHA-256 (16 hex digits) of a checkpoint's weight files, names and bytes,
    in name order; for a hub name, of the copy in the local cache. None when
    no weight file is found."""
    folder = Path(model)
    if not folder.is_dir():
        hub = require("huggingface_hub", "hf", "the hf policy")
        try:
            folder = Path(hub.snapshot_download(model, local_files_only=True))
        except Exception:  # not cached as a snapshot: nothing to hash
            return None
    files = sorted({f for pattern in WEIGHT_FILES for f in folder.glob(pattern)})
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()[:16]


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 160 else text[:157] + "..."
