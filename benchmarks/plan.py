"""Planner benchmark: ``python -m experiments.sweep action=plan`` of a 1,000-variant sweep, job.sh files included,
and ``python -m experiments.sweep --help``.

    .venv/bin/python benchmarks/plan.py [--variants 1000] [--repeats 3] [--against REV|DIR]

The sweep is sweep=full (5 dispatchers x overlap x delay_wgrad = 20 knob cells) times an extra axis over
model.global_batch_size with variants/20 values, on cluster=h100_slurm (half of them kept). Each run is a whole
process started in its tree (benchmarks/harness.py), writing a new sweep folder, with the job-template cache
(``MOE_SWEEP_CACHE``, launchers/templates.py) warm (the tree's own cache folder, filled by its untimed first run)
and cold (an empty folder per run: one NeMo-Run import and dry run). Printed per tree and cache: median wall and
CPU time, peak RSS; then this tree's time over the baseline's, measured in the same run. Prints figures, not
pass/fail.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

if __package__:
    from benchmarks import harness
else:  # python benchmarks/plan.py: this folder is sys.path[0]
    import harness


def overrides(n_variants: int, out: Path) -> list[str]:
    """The plan command's overrides for about ``n_variants`` variants, written to ``out``."""
    gbs = ",".join(str(64 * (i + 1)) for i in range(max(1, n_variants // 20)))
    return ["action=plan", "sweep=full", "cluster=h100_slurm", "model=qwen3_30b_a3b", "max_gpu_hours=1e9",
            f"model.global_batch_size={gbs}", f"output_dir={out}"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", type=int, default=1000, help="variants planned (default 1000)")
    ap.add_argument("--repeats", "--repeat", type=int, default=3, help="timed runs per tree and case (default 3)")
    harness.add_against(ap)
    a = ap.parse_args()
    print(harness.machine())
    with tempfile.TemporaryDirectory(prefix="plan-bench-") as tmp, harness.trees(a.against) as sides:
        work = Path(tmp)
        index = {side.label: k for k, side in enumerate(sides)}

        last: list[Path] = []  # the sweep folder of the latest run

        def args(side: harness.Tree) -> list[str]:
            last[:] = [Path(tempfile.mkdtemp(dir=work)) / "s"]
            return ["-m", "experiments.sweep", *overrides(a.variants, last[0])]

        def planned(side: harness.Tree, got: harness.Run) -> None:
            if got.rc or not any((last[0] / "variants").glob("*/job.sh")):
                raise SystemExit(f"action=plan of {side.label} wrote no job.sh ({got.rc}): {got.err[-2000:]}")

        warm = harness.alternate(sides, args, a.repeats, after=planned,
                                 env_of=lambda side: {"MOE_SWEEP_CACHE": str(work / f"cache-{index[side.label]}")})
        cold = harness.alternate(sides, args, a.repeats, warmup=0, after=planned,
                                 env_of=lambda side: {"MOE_SWEEP_CACHE": tempfile.mkdtemp(dir=work)})
        title = f"python -m experiments.sweep action=plan ({a.variants} variants, job.sh each)"
        print("\n".join(harness.table(f"{title}, template cache warm:", sides, warm)))
        print("\n".join(harness.table(f"{title}, template cache cold:", sides, cold)))
        helps = harness.alternate(sides, lambda side: ["-m", "experiments.sweep", "--help"], a.repeats)
        print("\n".join(harness.table("python -m experiments.sweep --help:", sides, helps)))
    print(harness.machine())
    return 0


if __name__ == "__main__":
    sys.exit(main())
