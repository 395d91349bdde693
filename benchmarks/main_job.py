"""Main-job benchmark: ``python -m experiments.sweep output_dir=DIR``, the default sweep (cluster=local; validate mode
on a machine without a GPU).

    .venv/bin/python benchmarks/main_job.py [--repeats 2] [--warmup 1] [--against REV|DIR]

Each run is a whole process started in its tree (benchmarks/harness.py), writing a new sweep folder in a temporary
folder; everything else is the default: plan, validate every kept variant, gates, analysis, report. The CPU time
counts the validate processes it waits for. Printed per tree: median wall and CPU time, exit codes, the local
NeMo-Run jobs it started and the runs that succeeded; then this tree's time over the baseline's, measured in the same
run. ``--warmup`` untimed runs of each tree come first (bytecode written, caches filled, as on a user's second run).
Prints figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

if __package__:
    from benchmarks import harness
else:  # python benchmarks/main_job.py: this folder is sys.path[0]
    import harness


def outcome(sweep: Path) -> tuple[int, int]:
    """(local NeMo-Run jobs, runs succeeded) of a finished sweep folder: every local job is one NeMo-Run task folder
    under ``nemo_run/.../experiments/<title>/<exp id>/<task>/``."""
    jobs = len([p for p in (sweep / "nemo_run").rglob("*")
                if p.is_dir() and p.parent.parent.parent.name == "experiments"])
    manifest = sweep / "manifest.json"
    variants = json.loads(manifest.read_text())["variants"] if manifest.exists() else []
    return jobs, sum(1 for v in variants for a in v.get("attempts", []) if a.get("status") == "succeeded")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=2, help="timed runs per tree (default 2)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs of each tree first (default 1)")
    harness.add_against(ap)
    a = ap.parse_args()
    print(harness.machine())
    with tempfile.TemporaryDirectory(prefix="main-job-bench-") as tmp, harness.trees(a.against) as sides:
        work = Path(tmp)
        made: dict[str, list[Path]] = {side.label: [] for side in sides}

        def args(side: harness.Tree) -> list[str]:
            sweep = Path(tempfile.mkdtemp(dir=work)) / "sweep"
            made[side.label].append(sweep)
            return ["-m", "experiments.sweep", f"output_dir={sweep}"]

        runs = harness.alternate(sides, args, a.repeats, warmup=a.warmup, check=False)
        print("\n".join(harness.table("python -m experiments.sweep output_dir=DIR (the default main job):", sides,
                                      runs)))
        for side in sides:
            jobs, ok = outcome(made[side.label][-1])
            print(f"  {side.label}: exit codes {sorted({r.rc for r in runs[side.label]})}, local NeMo-Run jobs {jobs}, "
                  f"runs succeeded {ok}")
    print(harness.machine())
    return 0


if __name__ == "__main__":
    sys.exit(main())
