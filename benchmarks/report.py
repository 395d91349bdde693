"""Report benchmark: ``python -m analysis.report LOG --out DIR`` of one generated typical log, end to end.

    .venv/bin/python benchmarks/report.py [--mb 100] [--repeats 3] [--against REV] [--keep DIR]

Each run is a fresh process; its wall time minus a bare interpreter start (``python -c pass``, measured in the same
run) is the figure: MB/s of the log (imports, parse, statistics, summary.json, report.md/html and PNG plots).
``--against REV`` runs the ``analysis`` and ``contracts`` packages of that git revision too, alternating, and prints
the ratio. Target (issue 17): at least 200 MB/s for a 100 MB log. Prints figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from parse import baseline_tree, generate  # noqa: E402  (benchmarks/parse.py: the same typical log)


def once(root: Path, log: Path, out: Path) -> float:
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "analysis.report", str(log), "--out", str(out), "--quiet"], cwd=root,
                         env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode not in (0, 3, 4) or not (out / "summary.json").exists():
        raise SystemExit(f"analysis.report failed ({res.returncode}): {res.stderr[-2000:]}")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--against", metavar="REV")
    ap.add_argument("--keep", type=Path, help="generate the log into this folder and keep it")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="report-bench-"))
    try:
        folder = a.keep or work
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / f"typical{a.mb}.log"
        if not log.exists():
            generate(log, a.mb << 20, others=True)
        mb = log.stat().st_size / (1 << 20)
        roots = [REPO] + ([baseline_tree(a.against, Path(tempfile.mkdtemp(dir=work)), "analysis", "contracts")]
                          if a.against else [])
        walls: list[list[float]] = [[] for _ in roots]
        bare = []
        for _ in range(a.repeats):
            for i, root in enumerate(roots):
                walls[i].append(once(root, log, work / "out"))
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            bare.append(time.perf_counter() - t0)
        py = statistics.median(bare)
        figures = []
        for label, w in zip(["current", a.against], walls, strict=False):
            s = statistics.median(w) - py
            figures.append(s)
            print(f"{label}: python -m analysis.report of a {mb:.0f} MB log: {statistics.median(w):.2f} s median of "
                  f"{len(w)} ({min(w):.2f}-{max(w):.2f}), {s:.2f} s without the {py:.3f} s interpreter start -> "
                  f"{mb / s:.0f} MB/s (target >= 200 MB/s)")
        if a.against:
            print(f"speed-up over {a.against}: {figures[1] / figures[0]:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
