"""Run figures 1 to 5 and print a compact table.

Run: ``.venv/bin/python benchmarks/run_all.py`` (about a minute and a half).
The figures are noisy on a small shared machine, so each script repeats its
measurement: figure 1 takes the median of 11 rounds' ratios, figure 2 the
best of two batches, figure 3 the median of five batches' percentiles. What a
loop reading the clock saw of the machine's own stops is printed before and
after.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import deadlines
import growth
import memory
import overhead
import slow_policies
from _common import clock_gaps, describe_gaps, verdict

GAP_SECONDS = 5.0


def _machine(when: str) -> str:
    """What a loop reading the clock saw of the machine's stops (see deadlines.py)."""
    return f"machine {when}: {describe_gaps(clock_gaps(GAP_SECONDS), GAP_SECONDS)}"


def main() -> None:
    rows: list[tuple[str, str, str, str]] = []
    before = _machine("before")
    print(before + "\n")
    fig1 = overhead.main()
    for name, value, target, ok in fig1["rows"]:
        rows.append(("1 " + name, value, target, verdict(ok)))
    print()
    fig2 = slow_policies.main()
    rows.append(("2 slow policies wall / ideal", f"{fig2['ratio']:.3f}x", "<= 1.15x",
                 verdict(fig2["ratio"] <= 1.15)))  # fmt: skip
    rows.append(("2 speed-up over one by one", f"{fig2['speedup']:.0f}x", "-", "-"))
    print()
    fig3 = deadlines.main()
    for n, target in ((100, 10.0), (1000, 100.0)):
        p = fig3[n]
        rows.append((f"3 overshoot p50/p99, {n} episodes (median)",
                     f"{p['p50_ms']:.1f}/{p['p99_ms']:.1f} ms", f"p99 <= {target:.0f} ms",
                     verdict(p["p99_ms"] <= target)))  # fmt: skip
    print()
    fig4 = memory.main()
    rows.append(("4 RSS per in-flight episode (10,000)", f"{fig4['kb_per_episode']:.1f} KB",
                 "<= 50 KB", verdict(fig4["kb_per_episode"] <= 50)))  # fmt: skip
    print()
    fig5 = growth.main()
    per = {n: fig5[n] / n * 1e3 for n in fig5}
    rows.append(("5 ms per episode at 100/1,000/10,000",
                 "/".join(f"{per[n]:.2f}" for n in sorted(per)), "flat",
                 verdict(per[10_000] <= 1.5 * min(per[100], per[1000]))))  # fmt: skip
    after = _machine("after")
    print("\nsummary")
    for row in rows:
        print(f"  {row[0]:46s} {row[1]:>16s}  {row[2]:>14s}  {row[3]}")
    print(f"  {before}\n  {after}")


if __name__ == "__main__":
    main()
