"""Submission benchmark on the local Slurm cluster (scripts/slurm_local/start.sh): per-job vs packed.

    .venv/bin/python benchmarks/submit.py [--runs 12 48] [--keep]

For each run count N it measures, from a fresh process state (NeMo-Run imported once, as the sweep command does):
- ``per_job``: N RunSpec-like jobs queued with one Slurm job each (``launchers.submit.submit_slurm``): seconds from
  the call to all N queued, and per run; N allocations (N queue waits);
- ``packed``: the same N runs in one allocation (``launchers.submit.submit_packed``): one queue wait.
The jobs run ``true`` (the submission path is what is measured); they are cancelled afterwards.
Prints figures, not pass/fail. Target: under 0.5 s of submission overhead per run (a nightly of 100 runs then
submits within a minute), one allocation per stage when packed.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _repo(root: Path) -> Path:
    code = root / "code"
    code.mkdir()
    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b",
           "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "c"]):
        if args[0] == "add":
            (code / "tool.py").write_text("print(1)\n")
        subprocess.run(["git", "-C", str(code), *args], check=True, env=env)
    return code


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, nargs="+", default=[12, 48])
    ap.add_argument("--keep", action="store_true", help="keep the scratch sweep folders")
    ap.add_argument("--repo", choices=["tiny", "this"], default="this",
                    help="code shipped: a clone of this repository (default) or a one-file repository")
    args = ap.parse_args()

    import yaml

    t0 = time.perf_counter()
    from launchers.home import nemo_run

    nemo_run()
    print(f"import nemo_run: {time.perf_counter() - t0:.2f} s (once per process)")
    from contracts.cluster import ClusterConfig
    from launchers.batch import BatchRequest
    from launchers.spec import JobCommand
    from launchers.submit import cancel, submit_packed, submit_slurm

    prof = ClusterConfig.from_mapping(yaml.safe_load((REPO / "conf" / "cluster" / "local_slurm.yaml").read_text())
                                      | {"gpus_per_node": 1})
    root = Path(tempfile.mkdtemp(prefix="bench-submit-"))
    code = _repo(root) if args.repo == "tiny" else root / "clone"
    if args.repo == "this":  # a clean clone of HEAD: the packager ships exactly this much
        subprocess.run(["git", "clone", "-q", "--local", str(REPO), str(code)], check=True)
    print(f"{'runs':>5} {'mode':>8} {'total s':>8} {'s/run':>7} {'allocations':>12}")
    try:
        for n in args.runs:
            items = [JobCommand(name=f"r{i:03d}", argv=("true",)) for i in range(n)]
            t = time.perf_counter()
            subs = submit_slurm(BatchRequest(cluster=prof, items=items, label="s1"),
                                state_dir=root / f"per{n}" / "nemo_run", repo=code)
            dt = time.perf_counter() - t
            print(f"{n:>5} {'per_job':>8} {dt:>8.2f} {dt / n:>7.3f} {len(subs):>12}")
            cancel([s.job_id for s in subs])
            t = time.perf_counter()
            pack = submit_packed(BatchRequest(cluster=prof, items=items, label="s1", run_time_s=60),
                                 state_dir=root / f"pack{n}" / "nemo_run", repo=code)
            dt = time.perf_counter() - t
            print(f"{n:>5} {'packed':>8} {dt:>8.2f} {dt / n:>7.3f} {1:>12}")
            cancel([pack.job.job_id])
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"packing saves {max(args.runs) - 1} of {max(args.runs)} queue waits for {max(args.runs)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
