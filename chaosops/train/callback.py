"""``EvalCallback``: the held-out suite played by the model being trained,
every N steps, its figures in the trainer's logs (the ``train`` extra)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from chaosops.agents.hf.settings import HFSettings
from chaosops.agents.policies import Others
from chaosops.env.models import AgentRole
from chaosops.env.world_sim import Scenario

from .evaluate import due_every, evaluate_model, seats_of

__all__ = ["EvalCallback"]


class EvalCallback(TrainerCallback):
    """Evaluate the live model on ``scenarios`` every ``every`` steps and at the
    end, through the runtime and the batched local policy
    (:func:`~chaosops.train.evaluate.evaluate_model`), and log
    ``eval/success``, ``eval/pass@k``, ``eval/mean_return`` and
    ``eval/legal_share`` at the step.

    Give it the trainer (``EvalCallback(..., trainer=trainer)`` or
    :meth:`attach`) to log through ``trainer.log``, so that every reporting
    integration sees the figures: on a step that logs, right after the step's
    own log (a log in between would take its place); without a trainer they
    go into ``state.log_history``. With ``out`` each evaluation is kept as a run
    folder ``out/step-N`` (``chaosops view out/step-*`` compares them), its
    log in it. The evaluations log nothing to the console: their turns and
    the warnings of answers that were no move go to ``log`` when given (a
    file, appended to), else to the run folder's ``log.jsonl``.
    Keep the training rows off these scenarios: ``chaosops.train.dataset(
    seed_offset=...)`` for training, the canonical suites here.
    """

    def __init__(
        self,
        tokenizer: Any,
        scenarios: Sequence[Scenario],
        *,
        every: int = 50,
        role: str | Sequence[str] | None = None,
        others: Others = "heuristic",
        samples: int = 1,
        out: str | Path | None = None,
        trainer: Any = None,
        log: str | Path | None = None,
        **settings: Any,
    ) -> None:
        _check(scenarios, every, role, samples, settings)
        self.tokenizer, self.scenarios, self.role = tokenizer, list(scenarios), role
        self.samples, self.out, self.settings, self.log = samples, out, settings, log
        self.others = others
        self.due = due_every(every)
        self.trainer = trainer
        self.reports: list[dict[str, float]] = []
        self._pending: dict[str, float] | None = None  # figures waiting for the step's log

    def attach(self, trainer: Any) -> EvalCallback:
        """Add this callback to ``trainer``, logging through it."""
        self.trainer = trainer
        trainer.add_callback(self)
        return self

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None,
                    **kwargs: Any) -> None:  # fmt: skip
        if model is None or not self.due(state.global_step, state.max_steps):
            return
        step = state.global_step
        out = None if self.out is None else Path(self.out) / f"step-{step}"
        figures = evaluate_model(
            model, self.tokenizer, self.scenarios, role=self.role, samples=self.samples,
            out=out, name=f"step-{step}", log=self.log, others=self.others, **self.settings,
        )  # fmt: skip
        logs = {f"eval/{name}": value for name, value in figures.items()}
        self.reports.append({"step": step, **logs})
        if self.trainer is None:
            state.log_history.append({**logs, "step": step})
        elif control.should_log:  # after the step's own log, which a log now would swallow
            self._pending = logs
        else:
            self.trainer.log(logs)

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None,
               **kwargs: Any) -> None:  # fmt: skip
        pending, self._pending = self._pending, None
        if pending is not None and self.trainer is not None:
            self.trainer.log(pending)


_EVALUATION = frozenset({"turn_timeout", "concurrency"})  # evaluate_model's own keywords


def _check(scenarios: Any, every: Any, role: Any, samples: Any, settings: dict[str, Any]) -> None:
    """One ValueError for the first argument a run would refuse later (at the
    first evaluation, ``every`` steps on), naming it and what it accepts."""
    roles = [r.value for r in AgentRole]
    try:
        seats = seats_of(role)
    except ValueError:
        seats = []
    if not seats:
        raise ValueError(
            f"role={role!r}: one of {', '.join(roles)}, a list of them, or None for all four"
        )
    for name, value in (("every", every), ("samples", samples)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}={value!r}: a whole number from 1")
    given = list(scenarios) if not isinstance(scenarios, str | bytes) else [scenarios]
    if not given or not all(isinstance(s, Scenario) for s in given):
        wrong = next((s for s in given if not isinstance(s, Scenario)), None)
        raise ValueError(
            f"scenarios: {'none given' if not given else f'{wrong!r:.40} is no Scenario'}; "
            "give Scenario objects (chaosops.scenarios.load_scenarios, "
            "chaosops.curriculum.generator.scenarios_for_tier)"
        )
    model = {k: v for k, v in settings.items() if k not in _EVALUATION}
    known = {f.name for f in dataclasses.fields(HFSettings)} - {"model"}
    if unknown := sorted(set(model) - known):
        raise ValueError(
            f"{unknown[0]}=: no such setting; the settings are {', '.join(sorted(known))}, "
            "turn_timeout and concurrency"
        )
    try:
        HFSettings(model="in-memory", **model)
    except ValueError as exc:
        raise ValueError(f"settings: {' '.join(str(exc).split())[:200]}") from None
