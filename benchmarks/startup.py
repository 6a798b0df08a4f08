"""What a ``chaosops`` command costs before it does anything: the wall time of
``chaosops --version``, ``chaosops --help`` and a one-episode scripted run
(the median of ``--repeat`` calls each), and which heavy libraries
``import chaosops.cli`` loads (none of them should be: each command that needs
one loads it itself). Every call of the command, and every CLI test, pays this.

Usage::

    python benchmarks/startup.py [--repeat 9]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = ("aiohttp", "uvicorn", "starlette", "jsonschema", "ray", "openenv", "datasets")
COMMAND = Path(sys.executable).parent / "chaosops"
CALLS = {
    "chaosops --version": ["--version"],
    "chaosops --help": ["--help"],
    "chaosops run, 1 episode": ["run", "--limit", "1", "--no-progress", "--out"],
}


def wall_ms(argv: list[str], repeat: int) -> float:
    """The median wall time of running ``argv``; a trailing ``--out`` gets a
    fresh folder each call."""
    times = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="chaosops-startup-") as folder:
            call = [*argv, str(Path(folder) / "run")] if argv[-1] == "--out" else argv
            started = time.perf_counter()
            subprocess.run(call, check=True, capture_output=True)
            times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def heavy_loaded() -> list[str]:
    """Which of :data:`HEAVY` importing the command loads."""
    probe = f"import sys, chaosops.cli; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    return out.stdout.split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    print(f"median of {args.repeat} calls; a bare `python -c pass`: "
          f"{wall_ms([sys.executable, '-c', 'pass'], args.repeat):.0f} ms")  # fmt: skip
    for name, argv in CALLS.items():
        print(f"  {name:<26} {wall_ms([str(COMMAND), *argv], args.repeat):6.0f} ms")
    loaded = heavy_loaded()
    print(f"  heavy libraries `import chaosops.cli` loads: {', '.join(loaded) or 'none'}")


if __name__ == "__main__":
    main()
