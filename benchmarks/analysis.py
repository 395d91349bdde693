"""Analysis benchmark: ``python -m analysis.report`` of 8 runs x 30k iterations, with speedups against one of them.

    .venv/bin/python benchmarks/analysis.py [--runs 8] [--iterations 30000] [--repeats 3] [--against REV|DIR]

Generates the runs' logs (iteration lines only, noisy step times and throughput; run k is k% slower than run 0),
then times ``python -m analysis.report LOG... --baseline alltoall --out DIR --quiet`` as a whole process started in
each tree (benchmarks/harness.py): parse, statistics (bootstrap intervals of 30k-iteration runs), speedups, report.
Printed per tree: median wall and CPU time, peak RSS; then this tree's time over the baseline's, measured in the
same run, and how far apart the two trees' intervals are (step time, TFLOP/s/GPU, tokens/s per run; speedups): the
largest relative difference and how many bounds are equal to 3 significant digits. Prints figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

if __package__:
    from benchmarks import harness
else:  # python benchmarks/analysis.py: this folder is sys.path[0]
    import harness

LINE = ("[2026-11-29 15:00:00] iteration {i:8d}/{n:8d} | consumed samples: {cs:12d} | elapsed time per iteration "
        "(ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): {tf:.1f} | learning rate: 2.989355E-04 | global batch "
        "size:   512 | lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: {gn:.3f} | number of skipped iterations:"
        "   0 | number of nan iterations:   0 |\n")
NAMES = ("alltoall", "deepep", "hybridep", "allgather", "flex", "a2a_ovl", "deepep_ovl", "hybridep_ovl")


def generate(folder: Path, runs: int, iterations: int) -> list[Path]:
    """One log per run; run k is k% slower than run 0, with 2% per-iteration noise."""
    paths = []
    for k in range(runs):
        rng = np.random.default_rng(k)
        ms = 5300.0 * (1 + k / 100) * (1 + 0.02 * rng.standard_normal(iterations))
        tf = 243.6 * 5300.0 / ms
        loss = 2.0 + 0.01 * rng.standard_normal(iterations)
        path = folder / f"{NAMES[k % len(NAMES)]}{k // len(NAMES) or ''}.log"
        with open(path, "w") as fh:
            fh.writelines(LINE.format(i=i + 1, n=iterations, cs=(i + 1) * 512, ms=ms[i], tf=tf[i], loss=loss[i],
                                      gn=1.0) for i in range(iterations))
        paths.append(path)
    return paths


def intervals(summary: dict) -> dict[str, float]:
    """Every interval bound of a summary.json, by name."""
    out: dict[str, float] = {}
    for r in summary.get("runs", []):
        for what in ("step_time_ms", "tflops_per_gpu", "tokens_per_s_per_gpu"):
            est = r.get(what)
            if isinstance(est, dict) and est.get("ci_low") is not None:
                out[f"{r['name']}.{what}.lo"], out[f"{r['name']}.{what}.hi"] = est["ci_low"], est["ci_high"]
    for c in summary.get("comparisons", []):
        sp = c.get("speedup")
        if isinstance(sp, dict) and sp.get("ci_low") is not None:
            out[f"{c['variant']}.speedup.lo"], out[f"{c['variant']}.speedup.hi"] = sp["ci_low"], sp["ci_high"]
    return out


def same_3_digits(a: float, b: float) -> bool:
    return float(f"{a:.3g}") == float(f"{b:.3g}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=30_000)
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per tree (default 3)")
    harness.add_against(ap)
    a = ap.parse_args()
    print(harness.machine())
    with tempfile.TemporaryDirectory(prefix="analysis-bench-") as tmp, harness.trees(a.against) as sides:
        work = Path(tmp)
        paths = generate(work, a.runs, a.iterations)
        out = {side.label: work / f"report-{k}" for k, side in enumerate(sides)}

        def args(side: harness.Tree) -> list[str]:
            shutil.rmtree(out[side.label], ignore_errors=True)
            return ["-m", "analysis.report", *map(str, paths), "--baseline", paths[0].stem, "--out",
                    str(out[side.label]), "--quiet"]

        def written(side: harness.Tree, got: harness.Run) -> None:
            if got.rc not in (0, 3, 4) or not (out[side.label] / "summary.json").exists():
                raise SystemExit(f"analysis.report of {side.label} failed ({got.rc}): {got.err[-2000:]}")

        runs = harness.alternate(sides, args, a.repeats, check=False, after=written)
        print("\n".join(harness.table(f"python -m analysis.report of {a.runs} runs x {a.iterations} iterations "
                                      f"--baseline {paths[0].stem}:", sides, runs)))
        if len(sides) > 1:
            cur, base = (intervals(json.loads((out[s.label] / "summary.json").read_text())) for s in sides)
            common = sorted(set(cur) & set(base))
            rel = max((abs(cur[k] - base[k]) / abs(base[k]) for k in common if base[k]), default=0.0)
            same = sum(same_3_digits(cur[k], base[k]) for k in common)
            print(f"  intervals: {len(common)} bounds in both, {same} equal to 3 significant digits, largest relative "
                  f"difference {rel:.2e}; only in one tree: {sorted(set(cur) ^ set(base)) or 'none'}")
    print(harness.machine())
    return 0


if __name__ == "__main__":
    sys.exit(main())
