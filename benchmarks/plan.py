"""Planner benchmark: ``action=plan`` of a 1,000-variant sweep, job.sh files included, and CLI start-up.

    .venv/bin/python benchmarks/plan.py [--variants 1000] [--repeat 3] [--sample 20] [--against REV]

Prints figures, not pass/fail. The sweep is sweep=full (5 dispatchers x overlap x delay_wgrad = 20 knob cells)
times an extra axis over model.global_batch_size with variants/20 values, on cluster=h100_slurm (500 kept).
- ``python -m experiments.sweep action=plan ...`` end to end, each in a fresh process (target < 3 s, issue 17), wall
  and CPU (user + sys) time, with the job-template cache (launchers/templates.py) cold (an empty
  ``MOE_SWEEP_CACHE``: one NeMo-Run import and dry run) and warm (the template on disk: no NeMo-Run import);
- ``--against REV``: the same command from that git revision's tree (``git archive``), the runs alternating with
  ours, and the ratios;
- in one process (cache warm): make_plan, then write_plan (variant.json, job.sh via JobScripts), and the print;
- the full NeMo-Run dry run per variant (``render_job`` without JobScripts, what write_plan did before issue 17) on
  ``--sample`` kept variants: every sampled job.sh must equal it ("equal" below), and its time scaled to all kept
  variants.
The load average is printed first: this machine's 2 cores are shared, so compare figures of one run only.
"""

from __future__ import annotations

import argparse
import contextlib
import io
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


def _bench_module():
    """benchmarks/parse.py, loaded from its file (benchmarks/analysis.py would shadow the ``analysis`` package this
    benchmark imports, were benchmarks/ on sys.path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("parse_bench", REPO / "benchmarks" / "parse.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def baseline_tree(rev: str, folder: Path, *paths: str) -> Path:
    """benchmarks/parse.py's ``baseline_tree``."""
    return _bench_module().baseline_tree(rev, folder, *paths)


def overrides(n_variants: int, out: Path) -> list[str]:
    gbs = ",".join(str(64 * (i + 1)) for i in range(max(1, n_variants // 20)))
    return ["action=plan", "sweep=full", "cluster=h100_slurm", "model=qwen3_30b_a3b", "max_gpu_hours=1e9",
            f"model.global_batch_size={gbs}", f"output_dir={out}"]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bench_cli(tree: Path, n_variants: int, cache: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one plan command of ``tree`` with the template cache folder ``cache``."""
    with tempfile.TemporaryDirectory() as d:
        env = _bench_module().child_env(tree, MOE_SWEEP_CACHE=str(cache))
        cpu0, t0 = _children_cpu(), time.perf_counter()
        subprocess.run([sys.executable, "-m", "experiments.sweep", *overrides(n_variants, Path(d) / "s")], cwd=tree,
                       check=True, capture_output=True, env=env)
        wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
        assert len(list((Path(d) / "s" / "variants").glob("*/job.sh"))) > 0
        return wall, cpu


def bench_in_process(n_variants: int, sample: int) -> dict[str, float]:
    from experiments.plan import make_plan, render_job, write_plan
    from experiments.report_plan import print_plan

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as d:
        ov = overrides(n_variants, Path(d) / "s")
        t0 = time.perf_counter()
        plan = make_plan(ov)
        t1 = time.perf_counter()
        root = write_plan(plan, ov)
        t2 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            print_plan(plan, root)
        t3 = time.perf_counter()
        kept = [v for v in plan.variants if v.status != "pruned"]
        picked = kept[:: max(1, len(kept) // sample)][:sample]
        t4 = time.perf_counter()
        same = 0
        for v in picked:  # the full dry run per variant, as before issue 17; the text must be the file's
            same += render_job(plan, v, root / "variants" / v.name / "variant.json") == (
                root / "variants" / v.name / "job.sh").read_text()
        t5 = time.perf_counter()
    out.update(make=t1 - t0, write=t2 - t1, print=t3 - t2, kept=len(kept), variants=len(plan.variants),
               full_per_variant=(t5 - t4) / len(picked), sampled=len(picked), same=same)
    return out


def _figures(runs: list[tuple[float, float]]) -> str:
    walls, cpus = [w for w, _ in runs], [c for _, c in runs]
    return (f"{statistics.median(walls):.2f} s wall median of {len(runs)} ({min(walls):.2f}-{max(walls):.2f}), "
            f"{statistics.median(cpus):.2f} s CPU")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sample", type=int, default=20, help="variants rendered by the full dry run (baseline)")
    ap.add_argument("--against", metavar="REV", help="also time the plan command of this git revision")
    a = ap.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    work = Path(tempfile.mkdtemp(prefix="plan-bench-"))
    try:
        trees = [("this tree", REPO)]
        if a.against:
            (work / "base").mkdir()
            trees.append((a.against, baseline_tree(a.against, work / "base", ".")))
        warm = work / "warm-cache"
        bench_cli(REPO, 20, warm)  # primes the warm cache with the template of this shape
        runs: dict[str, list[tuple[float, float]]] = {}
        for i in range(a.repeat):
            runs.setdefault("cold", []).append(bench_cli(REPO, a.variants, work / f"cold-{i}"))
            runs.setdefault("warm", []).append(bench_cli(REPO, a.variants, warm))
            for label, tree in trees[1:]:
                runs.setdefault(label, []).append(bench_cli(tree, a.variants, work / f"base-{i}"))
        os.environ["MOE_SWEEP_CACHE"] = str(warm)  # the in-process plan with the warm cache (and no ~/.cache)
        r = bench_in_process(a.variants, a.sample)
        now = r["make"] + r["write"] + r["print"]
        print(f"variants planned: {r['variants']} ({r['kept']} kept, job.sh each)")
        print("`python -m experiments.sweep action=plan ...` end to end (target < 3 s):")
        print(f"  template cache warm: {_figures(runs['warm'])}")
        print(f"  template cache cold: {_figures(runs['cold'])}")
        for label, _ in trees[1:]:
            base, warm_s, cold_s = (statistics.median(w for w, _ in runs[k]) for k in (label, "warm", "cold"))
            print(f"  {label}, same run:    {_figures(runs[label])} -> {base / warm_s:.2f}x (warm), "
                  f"{base / cold_s:.2f}x (cold)")
        print(f"in one process, cache warm: make_plan {r['make']:.2f} s, write_plan (variant.json + job.sh + manifest) "
              f"{r['write']:.2f} s, print {r['print']:.2f} s -> {now:.2f} s")
        print(f"full NeMo-Run dry run: {r['full_per_variant'] * 1e3:.1f} ms per variant ({r['sampled']} sampled, "
              f"{r['same']} equal to the plan's job.sh) -> about {r['full_per_variant'] * r['kept']:.1f} s for "
              f"{r['kept']} job.sh")
        help_s = []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "experiments.sweep", "--help"], cwd=REPO, check=True,
                           capture_output=True)
            help_s.append(time.perf_counter() - t0)
        print(f"`python -m experiments.sweep --help`: {statistics.median(help_s):.3f} s median (target < 1.5 s)")
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
