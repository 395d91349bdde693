"""Report benchmark: ``python -m analysis.report LOG --out DIR --quiet`` of one generated typical log, end to end.

    .venv/bin/python benchmarks/report.py [--mb 100] [--repeats 3] [--keep DIR] [--against REV|DIR]

Each run is a whole process started in its tree (benchmarks/harness.py): interpreter start, imports, parse,
statistics, summary.json, report.md/html and PNG plots, with every process it starts. The log is the typical log of
benchmarks/parse.py. Printed per tree: median wall and CPU time, peak RSS and MB/s of the log over the median wall
time; then this tree's time over the baseline's, measured in the same run. Prints figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

if __package__:
    from benchmarks import harness
    from benchmarks.parse import generate
else:  # python benchmarks/report.py: this folder is sys.path[0]
    import harness
    from parse import generate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=100, help="size of the generated log in MiB (default 100)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per tree (default 3)")
    ap.add_argument("--keep", type=Path, help="generate the log into this folder and keep it")
    harness.add_against(ap)
    a = ap.parse_args()
    print(harness.machine())
    with tempfile.TemporaryDirectory(prefix="report-bench-") as tmp, harness.trees(a.against) as sides:
        folder = a.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / f"typical{a.mb}.log"
        if not log.exists():
            generate(log, a.mb << 20, others=True)
        mb = log.stat().st_size / (1 << 20)
        out = Path(tmp) / "report"

        def args(side: harness.Tree) -> list[str]:
            shutil.rmtree(out, ignore_errors=True)
            return ["-m", "analysis.report", str(log), "--out", str(out), "--quiet"]

        def written(side: harness.Tree, got: harness.Run) -> None:
            if got.rc not in (0, 3, 4) or not (out / "summary.json").exists():
                raise SystemExit(f"analysis.report of {side.label} failed ({got.rc}): {got.err[-2000:]}")

        runs = harness.alternate(sides, args, a.repeats, check=False, after=written)
        print("\n".join(harness.table(f"python -m analysis.report of a {mb:.0f} MB log --out DIR --quiet:", sides,
                                      runs)))
        for side in sides:
            print(f"  {side.label}: {mb / harness.median(runs[side.label]):.1f} MB/s of the log (median wall)")
    print(harness.machine())
    return 0


if __name__ == "__main__":
    sys.exit(main())
