"""Detection rates of the nightly regression judgement on synthetic histories (analysis/history/synthetic.py).

    .venv/bin/python benchmarks/history.py [--trials 400] [--nights 30] [--seeds 20] [--threshold 0.05]

For each injected step-time regression (0%, 3%, 5%, 10%) on one variant of a 4-variant nightly series (3 repeats,
40 steady iterations per run, realistic noise: 1% night, 0.5% variant-night, 0.5% run, 2% iteration + 2% spikes),
prints how often the variant's step time, its speedup, or either was flagged as a regression, and the alarms
raised on the other variants. Then the false alarms over --seeds pure-noise histories of --nights nights.
These are the figures README "Nightly runs" documents; tests/analysis/history/test_detect.py asserts bands around
them with fewer trials.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.history.records import HistoryConfig  # noqa: E402
from analysis.history.synthetic import detection_rate, false_alarms  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--nights", type=int, default=30)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--threshold", type=float, default=0.05)
    ap.add_argument("--window", type=int, default=7)
    args = ap.parse_args()
    config = HistoryConfig(threshold=args.threshold, window=args.window)
    t0 = time.perf_counter()
    print(f"threshold {config.threshold:.0%}, window {config.window}, noise_k {config.noise_k:g}, "
          f"alpha {config.alpha:g}; {args.trials} trials per level (seeds 10000..)")
    print(f"{'injected':>9} {'step time':>10} {'speedup':>8} {'either':>7} {'other alarms':>13}")
    for level in (0.0, 0.03, 0.05, 0.10):
        r = detection_rate(level, args.trials, seed0=10_000, config=config)
        print(f"{level:>9.0%} {r.step_time:>10.1%} {r.speedup:>8.1%} {r.either:>7.1%} {r.other_alarms:>13d}")
    alarms = judged = 0
    for seed in range(args.seeds):
        a, j = false_alarms(args.nights, 20_000 + seed, config=config)
        alarms, judged = alarms + a, judged + j
    print(f"pure noise: {alarms} alarm(s) in {judged} judgements ({args.seeds} histories x {args.nights} nights)")
    print(f"{time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
