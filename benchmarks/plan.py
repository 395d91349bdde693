"""Planner benchmark: compose + expand + preflight + manifest for a 1,000-variant sweep, and CLI start-up.

    .venv/bin/python benchmarks/plan.py [--variants 1000] [--repeat 3]

Prints figures, not pass/fail: targets are < 1 s for 1,000 variants (excluding interpreter start) and
< 1.5 s for ``python -m experiments.sweep --help``. The sweep is sweep=full (5 dispatchers x overlap x delay_wgrad
= 20 knob cells) times an extra axis over model.global_batch_size with variants/20 values.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def bench_plan(n_variants: int) -> tuple[float, float, int]:
    from experiments import manifest
    from experiments.plan import make_plan, manifest_doc, variant_payload

    n_gbs = max(1, n_variants // 20)
    gbs = ",".join(str(64 * (i + 1)) for i in range(n_gbs))
    ov = ["action=plan", "sweep=full", "cluster=h100_slurm", "model=qwen3_30b_a3b", "max_gpu_hours=1e9",
          f"model.global_batch_size={gbs}"]
    t0 = time.perf_counter()
    plan = make_plan(ov)
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        doc = manifest_doc(plan)
        manifest.create(Path(d) / "s", doc)
        for v in plan.variants:
            if v.status != "pruned":
                manifest.write_json_atomic(Path(d) / "s" / "variants" / v.name / "variant.json",
                                           variant_payload(plan, v), durable=False)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, len(plan.variants)


def bench_help(repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "experiments.sweep", "--help"], cwd=REPO, check=True,
                       capture_output=True)
        times.append(time.perf_counter() - t0)
    return times


def bench_python_startup(repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    bench_plan(20)  # warm imports (hydra, omegaconf) so the figure excludes one-time import cost
    rows = [bench_plan(a.variants) for _ in range(a.repeat)]
    plan_s = statistics.median(r[0] for r in rows)
    write_s = statistics.median(r[1] for r in rows)
    print(f"variants planned:                      {rows[0][2]}")
    print(f"compose+expand+preflight (median of {a.repeat}): {plan_s:.3f} s  ({plan_s / rows[0][2] * 1e3:.3f} ms/variant)")
    print(f"manifest + variant.json writes:        {write_s:.3f} s")
    print(f"total (target < 1 s):                  {plan_s + write_s:.3f} s")
    h = bench_help(a.repeat)
    py = bench_python_startup(a.repeat)
    print(f"`python -m experiments.sweep --help`:  {statistics.median(h):.3f} s median (target < 1.5 s); "
          f"bare interpreter start {statistics.median(py):.3f} s -> ratio {statistics.median(h) / statistics.median(py):.1f}x")


if __name__ == "__main__":
    main()
