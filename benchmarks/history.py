"""Detection rates of the nightly regression judgement on synthetic histories (analysis/history/synthetic.py).

    .venv/bin/python benchmarks/history.py [--trials 400] [--nights 30] [--seeds 20] [--threshold 0.05]
        [--window 7] [--against REV|DIR]

For each injected step-time regression (0%, 3%, 5%, 10%) on one variant of a 4-variant nightly series (3 repeats,
40 steady iterations per run, realistic noise: 1% night, 0.5% variant-night, 0.5% run, 2% iteration + 2% spikes),
prints how often the variant's step time, its speedup, or either was flagged as a regression, and the alarms
raised on the other variants. Then the false alarms over --seeds pure-noise histories of --nights nights.
tests/analysis/history/test_detect.py asserts bands around these figures with fewer trials.
The simulation runs as a whole process of each tree (benchmarks/harness.py ``in_trees``: this script with
``--in-tree``, importing that tree's judgement code); each tree's table is printed, then the wall and CPU time of
each and this tree's over the baseline's, measured in the same run.
"""

from __future__ import annotations

import argparse
import sys
import time

if __package__:
    from benchmarks import harness
else:  # python benchmarks/history.py: this folder is sys.path[0]
    import harness


def simulate(a: argparse.Namespace) -> None:
    """The detection table and the false alarms, with the judgement code of the tree this process imports."""
    harness.use_tree()
    from analysis.history.records import HistoryConfig
    from analysis.history.synthetic import detection_rate, false_alarms

    config = HistoryConfig(threshold=a.threshold, window=a.window)
    t0 = time.perf_counter()
    print(f"threshold {config.threshold:.0%}, window {config.window}, noise_k {config.noise_k:g}, "
          f"alpha {config.alpha:g}; {a.trials} trials per level (seeds 10000..)")
    print(f"{'injected':>9} {'step time':>10} {'speedup':>8} {'either':>7} {'other alarms':>13}")
    for level in (0.0, 0.03, 0.05, 0.10):
        r = detection_rate(level, a.trials, seed0=10_000, config=config)
        print(f"{level:>9.0%} {r.step_time:>10.1%} {r.speedup:>8.1%} {r.either:>7.1%} {r.other_alarms:>13d}")
    alarms = judged = 0
    for seed in range(a.seeds):
        n, j = false_alarms(a.nights, 20_000 + seed, config=config)
        alarms, judged = alarms + n, judged + j
    print(f"pure noise: {alarms} alarm(s) in {judged} judgements ({a.seeds} histories x {a.nights} nights)")
    print(f"{time.perf_counter() - t0:.1f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--nights", type=int, default=30)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--threshold", type=float, default=0.05)
    ap.add_argument("--window", type=int, default=7)
    harness.add_against(ap)
    ap.add_argument(harness.IN_TREE, action="store_true", help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else argv
    a = ap.parse_args(argv)
    if a.in_tree:
        simulate(a)
        return 0
    return harness.in_trees(__file__, lambda side: harness.without(argv, "--against"), a.against)


if __name__ == "__main__":
    sys.exit(main())
