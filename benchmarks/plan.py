"""Planner benchmark: ``action=plan`` of a 1,000-variant sweep, job.sh files included, and CLI start-up.

    .venv/bin/python benchmarks/plan.py [--variants 1000] [--repeat 3] [--sample 20]

Prints figures, not pass/fail. The sweep is sweep=full (5 dispatchers x overlap x delay_wgrad = 20 knob cells)
times an extra axis over model.global_batch_size with variants/20 values, on cluster=h100_slurm (500 kept).
- ``python -m experiments.sweep action=plan ...`` end to end, each in a fresh process (target < 3 s, issue 17);
- in one process: make_plan, then write_plan (variant.json, job.sh via launchers.render.JobScripts: one NeMo-Run
  dry run per shape, then the variant name substituted), and the print;
- the baseline in the same run: the full NeMo-Run dry run per variant (``render_job_script``, what write_plan did
  before issue 17) on ``--sample`` kept variants, scaled to all kept variants, and the ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def overrides(n_variants: int, out: Path) -> list[str]:
    gbs = ",".join(str(64 * (i + 1)) for i in range(max(1, n_variants // 20)))
    return ["action=plan", "sweep=full", "cluster=h100_slurm", "model=qwen3_30b_a3b", "max_gpu_hours=1e9",
            f"model.global_batch_size={gbs}", f"output_dir={out}"]


def bench_cli(n_variants: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "experiments.sweep", *overrides(n_variants, Path(d) / "s")], cwd=REPO,
                       check=True, capture_output=True)
        wall = time.perf_counter() - t0
        assert len(list((Path(d) / "s" / "variants").glob("*/job.sh"))) > 0
        return wall


def bench_in_process(n_variants: int, sample: int) -> dict[str, float]:
    from experiments.plan import make_plan, render_job, write_plan
    from experiments.report_plan import print_plan
    from launchers.home import nemo_run

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as d:
        ov = overrides(n_variants, Path(d) / "s")
        t0 = time.perf_counter()
        plan = make_plan(ov)
        t1 = time.perf_counter()
        nemo_run()
        t2 = time.perf_counter()
        root = write_plan(plan, ov)
        t3 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            print_plan(plan, root)
        t4 = time.perf_counter()
        kept = [v for v in plan.variants if v.status != "pruned"]
        picked = kept[:: max(1, len(kept) // sample)][:sample]
        t5 = time.perf_counter()
        same = 0
        for v in picked:  # the full dry run per variant, as before issue 17; the text must be the file's
            same += render_job(plan, v, root / "variants" / v.name / "variant.json") == (
                root / "variants" / v.name / "job.sh").read_text()
        t6 = time.perf_counter()
    out.update(make=t1 - t0, nemo_import=t2 - t1, write=t3 - t2, print=t4 - t3, kept=len(kept),
               variants=len(plan.variants), full_per_variant=(t6 - t5) / len(picked), sampled=len(picked), same=same)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sample", type=int, default=20, help="variants rendered by the full dry run (baseline)")
    a = ap.parse_args()
    cli = [bench_cli(a.variants) for _ in range(a.repeat)]
    r = bench_in_process(a.variants, a.sample)
    base = r["make"] + r["nemo_import"] + r["full_per_variant"] * r["kept"] + r["write"]
    now = r["make"] + r["nemo_import"] + r["write"] + r["print"]
    print(f"variants planned: {r['variants']} ({r['kept']} kept, job.sh each)")
    print(f"`python -m experiments.sweep action=plan ...` end to end: {statistics.median(cli):.2f} s median of "
          f"{len(cli)} ({min(cli):.2f}-{max(cli):.2f}); target < 3 s")
    print(f"in one process: make_plan {r['make']:.2f} s, NeMo-Run import {r['nemo_import']:.2f} s, write_plan "
          f"(variant.json + job.sh + manifest) {r['write']:.2f} s, print {r['print']:.2f} s -> {now:.2f} s")
    print(f"baseline, same run: full NeMo-Run dry run {r['full_per_variant'] * 1e3:.1f} ms per variant "
          f"({r['sampled']} sampled, {r['same']} equal to the fast job.sh) -> about "
          f"{r['full_per_variant'] * r['kept']:.1f} s for {r['kept']} job.sh, plan about {base:.1f} s "
          f"({base / now:.1f}x the fast plan)")
    help_s = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "experiments.sweep", "--help"], cwd=REPO, check=True,
                       capture_output=True)
        help_s.append(time.perf_counter() - t0)
    print(f"`python -m experiments.sweep --help`: {statistics.median(help_s):.3f} s median (target < 1.5 s)")


if __name__ == "__main__":
    main()
