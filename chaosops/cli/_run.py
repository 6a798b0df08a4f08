"""``chaosops run``: one policy over the suites, outputs written as episodes finish."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._batches import Batch, execute, plan_batches, stop_code
from ._errors import CLIError
from ._plan import plan_episodes
from ._policies import policy_factory, prepare_llm
from ._terminal import configure_logs, console_for, note


def build_summary(records: Sequence[Mapping[str, Any]], planned: Sequence[str]) -> dict[str, Any]:
    """The content of ``summary.json``: totals and the evaluation rows.

    Derived from the results records only (no timestamps or wall times), so a
    resumed run ends with the same summary as an uninterrupted one.
    """
    from chaosops.evaluation import evaluate_records, rows_to_json

    done = {r["run_key"] for r in records}
    missing = [key for key in planned if key not in done]
    return {
        "episodes": len(records),
        "resolved": sum(1 for r in records if r.get("resolved")),
        "failed": sum(1 for r in records if r.get("status") != "ok"),
        "timeouts": sum(int(r.get("timeouts", 0)) for r in records),
        "errors": sum(int(r.get("errors", 0)) for r in records),
        "planned": len(planned),
        "missing": len(missing),
        "complete": not missing,
        "rows": rows_to_json(evaluate_records(records)),
    }


def cmd_run(args: argparse.Namespace) -> int:
    """``chaosops run``; returns the exit code."""

    from chaosops.evaluation import evaluate_records, render_table
    from chaosops.outputs import OutputError, RunOutputs, plan_keys

    from ._progress import ProgressBar

    planned = plan_episodes(args)
    keys = plan_keys(args.policy, [p.scenario for p in planned])
    llm = prepare_llm(args, [args.policy])
    factory = policy_factory(args.policy, llm)
    render = _renderer()

    outputs = RunOutputs(args.out, resume=args.resume, fsync=args.fsync)
    try:
        state = outputs.open()
    except OutputError as exc:
        raise CLIError(str(exc), code=2 if exc.usage else 1) from None
    try:
        table_stream = configure_logs(args)
        if args.resume:
            note(
                f"resuming {args.out}: {len(state.done_keys & set(keys))} of {len(keys)} "
                "episodes already done"
                + (", torn last results line dropped" if state.torn_results_line else "")
            )
        todo = [i for i, key in enumerate(keys) if key not in state.done_keys]
        progress = ProgressBar(
            enabled=not args.no_progress,
            total=len(todo),
            label=args.policy,
        )

        def on_result(batch: Batch, index: int, result: Any) -> None:
            outputs.write_episode(result, policy=args.policy, key=keys[index], render=render)
            progress.advance(result)

        batches = plan_batches(args, planned, todo, factory)
        stop = execute(
            batches,
            concurrency=args.concurrency,
            on_result=on_result,
            progress=progress,
            llm=llm,
        )
        records = outputs.records()
        summary = build_summary(records, keys)
        outputs.write_summary(summary)
    except OSError as exc:
        raise CLIError(f"cannot write to {args.out}: {exc.strerror or exc}", code=1) from None
    finally:
        outputs.close()

    if stop.signum is not None:
        note(
            f"interrupted: {progress.done} episode(s) finished this run, kept in "
            f"{outputs.results_path}; run again with --resume to finish"
        )
        return stop_code(stop)
    console = console_for(table_stream)
    console.print(render_table(evaluate_records(records), title=f"chaosops run: {args.out}"))
    note(f"wrote {outputs.results_path}, {outputs.trajectories_path}, {outputs.summary_path}")
    if summary["failed"]:
        note(f"{summary['failed']} episode(s) failed (see 'error' in {outputs.results_path})")
        return 1
    return 0


def _renderer() -> Callable[[Any, Any], Any] | None:
    try:
        from chaosops.agents.llm.render import build_messages
    except ImportError:  # pragma: no cover - the LLM package is part of chaosops
        return None
    return build_messages
