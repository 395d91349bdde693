"""Report benchmark: ``python -m analysis.report LOG --out DIR`` of one generated typical log, end to end.

    .venv/bin/python benchmarks/report.py [--mb 100] [--repeats 3] [--against REV] [--keep DIR] [--bytecode-cache]

Each run is a fresh process; its wall time minus a bare interpreter start (``python -c pass``, measured in the same
run) is the figure: MB/s of the log (imports, parse, statistics, summary.json, report.md/html and PNG plots).
``--against REV`` runs the ``analysis`` and ``contracts`` packages of that git revision too, alternating, and prints
the ratio. The environment is passed on as it is: where PYTHONDONTWRITEBYTECODE is set (as in the engineers'
shells here), every run compiles the project's modules from source (about 0.1 s of CPU); ``--bytecode-cache``
instead caches the bytecode of both trees in a temporary PYTHONPYCACHEPREFIX, filled by one untimed run of each,
as a user's second run would find it. Target (issue 17): at least 200 MB/s for a 100 MB log. Prints figures, not
pass/fail.
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
sys.path.insert(0, str(REPO / "benchmarks"))

from parse import baseline_tree, generate  # noqa: E402  (benchmarks/parse.py: the same typical log)


def once(root: Path, log: Path, out: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s of the command and every process it forked) of one report."""
    shutil.rmtree(out, ignore_errors=True)
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "analysis.report", str(log), "--out", str(out), "--quiet"], cwd=root,
                         env={**env, "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])},
                         capture_output=True, text=True)
    wall = time.perf_counter() - t0
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode not in (0, 3, 4) or not (out / "summary.json").exists():
        raise SystemExit(f"analysis.report failed ({res.returncode}): {res.stderr[-2000:]}")
    return wall, c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--against", metavar="REV")
    ap.add_argument("--keep", type=Path, help="generate the log into this folder and keep it")
    ap.add_argument("--bytecode-cache", action="store_true",
                    help="cache both trees' bytecode (PYTHONPYCACHEPREFIX, one untimed run each) instead of "
                         "passing the environment's PYTHONDONTWRITEBYTECODE on")
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
        env = dict(os.environ)
        if a.bytecode_cache:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
            for root in roots:
                once(root, log, work / "out", env)
        cache = "cached in PYTHONPYCACHEPREFIX" if a.bytecode_cache else "as the environment says"
        print(f"bytecode: {cache}; PYTHONDONTWRITEBYTECODE={env.get('PYTHONDONTWRITEBYTECODE')!r}; load average "
              f"{os.getloadavg()[0]:.2f}")
        walls: list[list[float]] = [[] for _ in roots]
        cpus: list[list[float]] = [[] for _ in roots]
        bare = []
        for _ in range(a.repeats):
            for i, root in enumerate(roots):
                wall, cpu = once(root, log, work / "out", env)
                walls[i].append(wall)
                cpus[i].append(cpu)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
            bare.append(time.perf_counter() - t0)
        py = statistics.median(bare)
        figures = []
        for label, w, c in zip(["current", a.against], walls, cpus, strict=False):
            s = statistics.median(w) - py
            figures.append(s)
            print(f"{label}: python -m analysis.report of a {mb:.0f} MB log: {statistics.median(w):.2f} s median of "
                  f"{len(w)} ({min(w):.2f}-{max(w):.2f}), {s:.2f} s without the {py:.3f} s interpreter start -> "
                  f"{mb / s:.0f} MB/s (target >= 200 MB/s); CPU {statistics.median(c):.2f} s (all its processes)")
        if a.against:
            print(f"speed-up over {a.against}: {figures[1] / figures[0]:.2f}x")
        print(f"load average at the end {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
