"""Submission benchmark on the local Slurm cluster (scripts/slurm_local/start.sh): a detached sweep, per-job and
packed.

    .venv/bin/python benchmarks/submit.py [--sweep-repeats 1,4] [--repeats 2] [--against REV|DIR]

Times ``python -m experiments.sweep cluster=local_slurm sweep=full repeats=R pack=false|true detach=true
allow_dirty=true output_dir=DIR`` as a whole process started in each tree (benchmarks/harness.py): plan, package
the code, submit every kept run (7 variants x R repeats) with one Slurm job each (``pack=false``) or one allocation
per block (``pack=true``), write the manifest and return without waiting. The jobs it queued are cancelled after
each run (``scancel`` of the manifest's job ids; untimed). Printed per tree and case: median wall and CPU time, peak
RSS, runs and Slurm jobs queued; then this tree's time over the baseline's, measured in the same run. Prints
figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__:
    from benchmarks import harness
else:  # python benchmarks/submit.py: this folder is sys.path[0]
    import harness


def queued(sweep: Path) -> tuple[int, list[str]]:
    """(runs with a job id, the distinct Slurm job ids) of a sweep folder's manifest."""
    manifest = sweep / "manifest.json"
    variants = json.loads(manifest.read_text())["variants"] if manifest.exists() else []
    ids = [a["job_id"] for v in variants for a in v.get("attempts", []) if a.get("job_id")]
    return len(ids), sorted(set(ids))


def case(sides: list[harness.Tree], work: Path, repeats: int, pack: str, timed: int) -> None:
    """Time the detached sweep with ``repeats=`` and ``pack=`` in every tree ``timed`` times; print the figures."""
    last: list[Path] = []  # the sweep folder of the latest run
    counts: dict[str, tuple[int, int]] = {}

    def args(side: harness.Tree) -> list[str]:
        last[:] = [Path(tempfile.mkdtemp(dir=work)) / "sweep"]
        return ["-m", "experiments.sweep", "cluster=local_slurm", "sweep=full", f"repeats={repeats}", f"pack={pack}",
                "detach=true", "allow_dirty=true", f"output_dir={last[0]}"]

    def cancel(side: harness.Tree, got: harness.Run) -> None:
        runs, ids = queued(last[0])
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True, check=False)
        if got.rc or not ids:
            raise SystemExit(f"the detached sweep of {side.label} queued nothing ({got.rc}): {got.err[-2000:]}")
        counts[side.label] = (runs, len(ids))

    runs = harness.alternate(sides, args, timed, after=cancel, check=False)
    print("\n".join(harness.table(f"python -m experiments.sweep cluster=local_slurm sweep=full repeats={repeats} "
                                  f"pack={pack} detach=true:", sides, runs)))
    for side in sides:
        print(f"  {side.label}: {counts[side.label][0]} runs in {counts[side.label][1]} Slurm job(s)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sweep-repeats", default="1,4", help="the sweep's repeats= values, comma-separated (default 1,4)")
    ap.add_argument("--repeats", type=int, default=2, help="timed runs per tree and case (default 2)")
    harness.add_against(ap)
    a = ap.parse_args()
    print(harness.machine())
    with tempfile.TemporaryDirectory(prefix="submit-bench-") as tmp, harness.trees(a.against) as sides:
        for repeats in [int(x) for x in a.sweep_repeats.split(",")]:
            for pack in ("false", "true"):
                case(sides, Path(tmp), repeats, pack, a.repeats)
    print(harness.machine())
    return 0


if __name__ == "__main__":
    sys.exit(main())
