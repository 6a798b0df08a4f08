"""``EvalCallback``: the held-out suite played by the model being trained,
every N steps, its figures in the trainer's logs (the ``train`` extra)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from chaosops.env.world_sim import Scenario

from .evaluate import due_every, evaluate_model

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
    folder ``out/step-N`` (``chaosops view out/step-*`` compares them).
    Keep the training rows off these scenarios: ``chaosops.train.dataset(
    seed_offset=...)`` for training, the canonical suites here.
    """

    def __init__(
        self,
        tokenizer: Any,
        scenarios: Sequence[Scenario],
        *,
        every: int = 50,
        role: str | None = None,
        samples: int = 1,
        out: str | Path | None = None,
        trainer: Any = None,
        **settings: Any,
    ) -> None:
        self.tokenizer, self.scenarios, self.role = tokenizer, list(scenarios), role
        self.samples, self.out, self.settings = samples, out, settings
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
            out=out, name=f"step-{step}", **self.settings,
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
