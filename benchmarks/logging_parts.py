"""Figure 1's logging cost taken apart: what each part of a logged turn adds.

Not a figure of RUNTIME.md: the table behind benchmarks/README.md's
"logging taken apart again". Each variant runs in processes of its own,
interleaved with the other variants' (a slow spell of the machine then falls
on all of them alike); a process plays figure 1's batch at concurrency 1
once to warm up, then ``ROUNDS`` times unlogged and logged in turn, and
prints the median of its rounds' ratios. The table gives, per variant, the
median over its processes and each process's own reading.

Variants (the logged side; the unlogged side is the same in all):

- ``full``: logging to a file, as figure 1;
- ``check``: configured, then the level put back to warning (nothing is
  logged: what the harness itself reads, about zero);
- ``built``: the described fields and the runtime's struct built, no event
  written;
- ``episode_events``: the episode events written, no turn line;
- ``constant_line``: every event, but a turn writes a constant pre-encoded
  line of the usual size (the turn line's rendering left out);
- ``no_write``: every line rendered, the write call replaced by a Python
  function (the file system's and the system call's part left out);
- ``dev_null``: every line rendered and written to ``/dev/null`` (a system
  call, no file system).

It swaps internals of ``actors._logging`` in the child processes; it
measures, it does not test. Run: ``.venv/bin/python benchmarks/logging_parts.py``
(about two minutes; ``--processes N``, default 5).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

VARIANTS = (
    "full", "check", "built", "episode_events", "constant_line", "no_write", "dev_null",
)  # fmt: skip
ROUNDS = 5
# The size of a usual turn line (bytes), for constant_line.
_CONSTANT_LINE = (
    b'{"step":3,"action_type":"restart_service","target":"payments-db","args":{},'
    b'"episode_id":"3f1c2a9b8d7e4f60a1b2c3d4e5f60718","turn":12,"role":"sre",'
    b'"reward":-0.05,"done":false,"timed_out":false,"error":null,"latency_ms":0.042,'
    b'"event":"turn","level":"info","run_id":"0123456789abcdef0123456789abcdef",'
    b'"timestamp":"2026-11-22T10:11:12.123456Z"}\n'
)


def _configure(variant: str, path: Path) -> None:
    from actors import _logging

    _logging.configure_logging(path)
    state = _logging.STATE
    if variant == "check":
        state.threshold = _logging.WARNING
    elif variant == "built":
        state.emit_turn = lambda *turn: None
        state.emit = lambda method_name, event, event_dict: None
    elif variant == "episode_events":
        state.emit_turn = lambda *turn: None
    elif variant == "constant_line":
        fd, write = state.json_line._fd, os.write  # type: ignore[union-attr]
        state.emit_turn = lambda *turn: write(fd, _CONSTANT_LINE)
    elif variant == "no_write":
        _logging._write = lambda fd, data: 1 << 30
    elif variant == "dev_null":
        state.json_line._fd = os.open(os.devnull, os.O_WRONLY)  # type: ignore[union-attr]


def _child(variant: str) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import overhead

    from actors import _logging

    scenarios = overhead._scenarios(25)
    write = _logging._write  # no_write swaps it: put back each round
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        overhead.runtime_us_per_turn(scenarios, 1)  # warm-up
        for _ in range(ROUNDS):
            off = overhead.runtime_us_per_turn(scenarios, 1)
            _configure(variant, Path(tmp) / "run.jsonl")
            try:
                on = overhead.runtime_us_per_turn(scenarios, 1)
            finally:
                _logging.disable_logging()
                _logging._write = write
            ratios.append(on / off - 1)
    print(statistics.median(ratios))


def main(processes: int = 5) -> dict[str, list[float]]:
    readings: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for _ in range(processes):
        for variant in VARIANTS:
            done = subprocess.run(
                [sys.executable, __file__, "--child", variant],
                capture_output=True,
                text=True,
                check=True,
            )
            readings[variant].append(float(done.stdout))
    print(f"logging taken apart (concurrency 1; {processes} processes a variant, "
          f"each the median of {ROUNDS} rounds)")  # fmt: skip
    for variant, values in readings.items():
        each = " ".join(f"{v:+.1%}" for v in values)
        print(f"  {variant:16s} adds {statistics.median(values):+6.1%}   [{each}]")
    return readings


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--child", choices=VARIANTS)
    args = parser.parse_args()
    if args.child:
        _child(args.child)
    else:
        main(args.processes)
