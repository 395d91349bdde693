"""Main-job benchmark: ``python -m experiments.sweep`` with no overrides (cluster=local, validate mode on a CPU).

    .venv/bin/python benchmarks/main_job.py [--repeats 2] [--against REV|DIR] [--warmup 1]

Each run is a fresh process writing a new sweep folder (``output_dir=`` in a temporary folder; everything else is
the default: plan, validate every kept variant, gates, analysis, report). Prints the median wall time, the number
of validate processes it started (local NeMo-Run jobs) and the validated runs. ``--against REV`` runs that git
revision's tree (or the tree in folder DIR) on the same machine, alternating, and prints the ratio. Each tree runs
``--warmup`` times untimed first, and bytecode is written as Python does by default (``benchmarks/parse.py``'s
``child_env``), so the figure is a user's second run, not a first one that compiles every module. Target (issue 17): under 8 s, one
validate process for all kept variants of a stage. Prints figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from parse import baseline_tree, child_env  # noqa: E402  (benchmarks/parse.py)


def once(tree: Path, work: Path) -> tuple[float, int, int, int]:
    """(wall s, exit code, validate processes, runs validated) of one default main job of ``tree``."""
    out = Path(tempfile.mkdtemp(dir=work)) / "sweep"
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "experiments.sweep", f"output_dir={out}"], cwd=tree,
                         env=child_env(tree), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    # every local job is one NeMo-Run task folder under nemo_run/.../experiments/<title>/<exp id>/<task>/
    jobs = len([p for p in (out / "nemo_run").rglob("*") if p.is_dir() and p.parent.parent.parent.name == "experiments"])
    m = json.loads((out / "manifest.json").read_text()) if (out / "manifest.json").exists() else {"variants": []}
    runs = sum(1 for v in m["variants"] for a in v.get("attempts", []) if a.get("status") == "succeeded")
    return wall, res.returncode, jobs, runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--against", metavar="REV", help="a git revision, or a folder holding a tree of one")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs of each tree first (default 1)")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="main-job-bench-"))
    try:
        trees = [("current", REPO)]
        if a.against:
            base = work / "base"
            base.mkdir()
            baseline_tree(a.against, base, ".")
            trees.append((a.against, base))
        rows: dict[str, list[tuple[float, int, int, int]]] = {label: [] for label, _ in trees}
        for _ in range(a.warmup):  # not timed: bytecode written, caches filled, as on a user's second run
            for _label, tree in trees:
                once(tree, work)
        for _ in range(a.repeats):
            for label, tree in trees:
                rows[label].append(once(tree, work))
        walls = {}
        for label, got in rows.items():
            w = [g[0] for g in got]
            walls[label] = statistics.median(w)
            print(f"{label}: default main job {walls[label]:.1f} s median of {len(w)} ({min(w):.1f}-{max(w):.1f}); "
                  f"exit codes {sorted({g[1] for g in got})}, local NeMo-Run jobs {got[0][2]}, runs succeeded "
                  f"{got[0][3]} (target < 8 s)")
        if a.against:
            print(f"speed-up over {a.against}: {walls[a.against] / walls['current']:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
