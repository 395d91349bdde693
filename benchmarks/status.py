"""``action=status`` benchmark: the run table of a sweep with 100 kept variants, each with an attempt and a log.

    .venv/bin/python benchmarks/status.py [--repeat 5] [--against REV]

Plans a sweep (cluster=h100_slurm, 200 variants, 100 kept), gives every kept variant a submitted attempt with a
job id and a 256 KiB log of iteration lines, then times ``python -m experiments.sweep action=status output_dir=...``
in fresh processes (median, minus a bare interpreter start; wall and CPU time). The command asks the scheduler
itself (one squeue and one sacct call for the 100 live job ids, on the real local Slurm); one more
``launchers.track.query`` is timed apart and added as before, so the last line counts the query twice (the measure
of earlier runs). ``--against REV`` also times the status command of that git revision's tree on the same sweep
(runs alternate) and prints the ratio. Target (issue 17): status plus the scheduler query under 0.5 s. Prints
figures, not pass/fail, with the load average (2 shared cores: compare figures of one run only).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from parse import baseline_tree  # noqa: E402  (benchmarks/parse.py)

LINE = ("[2026-11-29 15:00:00] iteration {i:8d}/    1000 | consumed samples: {cs:12d} | elapsed time per iteration "
        "(ms): 5300.0 | throughput per GPU (TFLOP/s/GPU): 243.6 | lm loss: 1.800000E+00 | grad norm: 1.000 |\n")


def make_sweep(root: Path) -> int:
    """The sweep folder at ``root``; returns its number of kept variants."""
    from contracts.manifest import Manifest
    from contracts.statuses import ManifestStatus
    from contracts.sweepdir import SweepDir

    gbs = ",".join(str(64 * (i + 1)) for i in range(10))
    subprocess.run([sys.executable, "-m", "experiments.sweep", "action=plan", "sweep=full", "cluster=h100_slurm",
                    "model=qwen3_30b_a3b", "max_gpu_hours=1e9", f"model.global_batch_size={gbs}",
                    f"output_dir={root}"], cwd=REPO, check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    sd = SweepDir(root)
    log = "".join(LINE.format(i=i, cs=i * 512) for i in range(1, 1 + (256 << 10) // len(LINE)))

    def attach(m: Manifest) -> int:
        kept = 0
        for k, v in enumerate(m.variants):
            if v.status == "pruned":
                continue
            a = v.new_attempt(0)
            a.set(status=ManifestStatus.RUNNING, job_id=str(900000 + k))
            logs = sd.logs(a.ref(v.name))
            logs.mkdir(parents=True, exist_ok=True)
            (logs / f"log-{a.task}_{a.job_id}_0.out").write_text(log)
            kept += 1
        return kept

    return Manifest.update(sd, attach)[1]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


CPU: dict[Path, list[float]] = {}


def time_status(tree: Path, sweep: Path) -> float:
    """Wall seconds of one status command of ``tree`` (its CPU seconds go to ``CPU[tree]``)."""
    cpu0, t0 = _children_cpu(), time.perf_counter()
    subprocess.run([sys.executable, "-m", "experiments.sweep", "action=status", f"output_dir={sweep}"], cwd=tree,
                   check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "160"})
    CPU.setdefault(tree, []).append(_children_cpu() - cpu0)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--against", metavar="REV", help="also time the status command of this git revision")
    a = ap.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    work = Path(tempfile.mkdtemp(prefix="status-bench-"))
    try:
        sweep = work / "sweep"
        kept = make_sweep(sweep)
        trees = [REPO]
        if a.against:
            base = work / "base"
            base.mkdir()
            baseline_tree(a.against, base, ".")
            trees.append(base)
        times: list[list[float]] = [[] for _ in trees]
        bare = []
        for _ in range(a.repeat):
            for i, tree in enumerate(trees):
                times[i].append(time_status(tree, sweep))
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            bare.append(time.perf_counter() - t0)
        from launchers.track import query

        ids = [str(900000 + k) for k in range(200)]
        q = []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            try:
                query(ids)
                q.append(time.perf_counter() - t0)
            except Exception as exc:  # noqa: BLE001  (no Slurm here: say so, keep the other figures)
                print(f"scheduler query failed: {exc}")
                break
        py = statistics.median(bare)
        now = statistics.median(times[0])
        qs = statistics.median(q) if q else float("nan")
        print(f"action=status, {kept} kept variants with an attempt and a log each, its own squeue + sacct "
              f"included: {now:.3f} s median of {a.repeat} ({min(times[0]):.3f}-{max(times[0]):.3f}), "
              f"{statistics.median(CPU[REPO]):.3f} s CPU; bare interpreter start {py:.3f} s -> {now - py:.3f} s "
              "(target < 0.5 s)")
        print(f"one more squeue + sacct call (launchers.track.query, real local Slurm): {qs:.3f} s median")
        print(f"status + that query again, without interpreter start: {now - py + qs:.3f} s (the earlier measure)")
        if a.against:
            then = statistics.median(times[1])
            print(f"{a.against}, same run: {then:.3f} s ({then - py:.3f} s without start), "
                  f"{statistics.median(CPU[trees[1]]):.3f} s CPU -> {(then - py) / (now - py):.2f}x")
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
