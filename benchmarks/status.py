"""``action=status`` benchmark: the run table of a sweep with 100 kept variants, each with an attempt and a log.

    .venv/bin/python benchmarks/status.py [--repeats 5] [--against REV|DIR]

Plans a sweep with this tree (cluster=h100_slurm, 200 variants, 100 kept), gives every kept variant a submitted
attempt with a job id and a 256 KiB log of iteration lines, then times
``python -m experiments.sweep action=status output_dir=SWEEP`` as a whole process started in each tree
(benchmarks/harness.py) on that same sweep. The command asks the scheduler itself (one squeue and one sacct call for
the 100 job ids, on the real local Slurm). Printed per tree: median wall and CPU time, peak RSS; then this tree's time
over the baseline's, measured in the same run. Prints figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

if __package__:
    from benchmarks import harness
else:  # python benchmarks/status.py: this folder is sys.path[0]
    import harness

ATTACH = """
import sys
from pathlib import Path
from contracts.manifest import Manifest
from contracts.statuses import ManifestStatus
from contracts.sweepdir import SweepDir

LINE = ("[2026-11-29 15:00:00] iteration {i:8d}/    1000 | consumed samples: {cs:12d} | elapsed time per iteration "
        "(ms): 5300.0 | throughput per GPU (TFLOP/s/GPU): 243.6 | lm loss: 1.800000E+00 | grad norm: 1.000 |\\n")
sd = SweepDir(Path(sys.argv[1]))
log = "".join(LINE.format(i=i, cs=i * 512) for i in range(1, 1 + (256 << 10) // len(LINE)))


def attach(m):
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


print(Manifest.update(sd, attach)[1])
"""


def make_sweep(root: Path) -> int:
    """Plan the sweep at ``root`` and give every kept variant a running attempt with a log (this tree's code, in
    processes of their own); returns the number of kept variants."""
    gbs = ",".join(str(64 * (i + 1)) for i in range(10))
    harness.run(harness.REPO, ["-m", "experiments.sweep", "action=plan", "sweep=full", "cluster=h100_slurm",
                               "model=qwen3_30b_a3b", "max_gpu_hours=1e9", f"model.global_batch_size={gbs}",
                               f"output_dir={root}"])
    return int(harness.run(harness.REPO, ["-c", ATTACH, str(root)]).out.strip())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", "--repeat", type=int, default=5, help="timed runs per tree (default 5)")
    harness.add_against(ap)
    a = ap.parse_args()
    print(harness.machine())
    with tempfile.TemporaryDirectory(prefix="status-bench-") as tmp, harness.trees(a.against) as sides:
        sweep = Path(tmp) / "sweep"
        kept = make_sweep(sweep)
        runs = harness.alternate(sides, lambda side: ["-m", "experiments.sweep", "action=status",
                                                      f"output_dir={sweep}"], a.repeats, env_of=lambda side: {
                                                          "COLUMNS": "160"})
        print("\n".join(harness.table(f"python -m experiments.sweep action=status output_dir=SWEEP ({kept} kept "
                                      "variants with an attempt and a log each, squeue + sacct included):", sides,
                                      runs)))
    print(harness.machine())
    return 0


if __name__ == "__main__":
    sys.exit(main())
