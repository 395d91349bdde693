"""Log-parser benchmark: parse throughput (MB/s) and peak memory on generated multi-GB-scale logs, next to
``grep -c iteration`` on the same file.

    .venv/bin/python benchmarks/parse.py [--mb 10,100,1024,3072] [--logs typical,iterations] [--keep DIR]
        [--repeats 3] [--against GIT_REV]

Two logs are generated in a temporary folder (or ``--keep DIR``):
- ``typical.log``: a multi-rank Megatron-Bridge log with one iteration line per ten other lines (Step Time,
  NCCL INFO, timers, warnings with ``[rankN]:`` / ``[defaultN]:`` prefixes, memory lines);
- ``iterations.log``: iteration lines only.
Each file is parsed ``--repeats`` times, each in a fresh process (``analysis.parse.parse_files``), which reports
wall time, CPU time (its own, then with its forked half: ``analysis.split``) and its peak RSS (the largest of
the process and its forked half); the median parse is shown with the range of the repeats and the largest RSS.
Prints figures, not pass/fail. Targets (issue 17): >= 300 MB/s on the typical log at 10 MB, 100 MB, 1 GB and
3 GB, at most 4x the time of ``grep -c`` at 1 GB, peak RSS <= 150 MB at any size (issue 4: >= 50 MB/s on the
iteration-only log). The machine's speed matters: the ``grep -c`` column and the ratio make runs on different
machines comparable.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ITERATION = ("[{rank}]: [2026-11-29 15:{mm:02d}:{ss:02d}] iteration {i:8d}/{total:8d} | consumed samples: {cs:12d} | "
             "elapsed time per iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): {tf:.1f} | learning rate: "
             "2.989355E-04 | global batch size:   512 | lm loss: {loss:.6E} | load_balancing_loss: 1.013377E+00 | "
             "loss scale: 1.0 | grad norm: {gn:.3f} | number of skipped iterations:   0 | number of nan iterations:   0 |")
OTHERS = (
    "Step Time : {s:.2f}s GPU utilization: {tf:.1f}MODEL_TFLOP/s/GPU",
    "node{r:02d}:1234:1290 [{g}] NCCL INFO Channel 02/0 : {g}[{g}] -> {h}[{h}] via P2P/CUMEM/read",
    "[default{g}]:    forward-backward ...............................: ({ms:.2f}, {ms2:.2f})",
    "[rank{r}]:[W1129 15:08:09.000 ProcessGroupNCCL.cpp:4561] Warning: an error occurred in a callback, retrying",
    "[rank{r}]: /opt/megatron/core/models/gpt/gpt_layer_specs.py:74: UserWarning: Apex is not installed.",
    "[default{g}]:     optimizer ......................................: (11.02, 11.40)",
    "INFO:megatron.core.timers:(min, max) time across ranks (ms):",
    "[rank{r}]:   warnings.warn(",
    "Number of dense and embedding parameters in billions: 30.53",
    "[Rank {r}] (after {i} iterations) memory (GB) | mem-allocated-gigabytes: 51.072 | mem-max-allocated-gigabytes: "
    "{mem:.2f} | mem-max-reserved-gigabytes: 216.89 | mem-alloc-retires: 0",
)


def generate(path: Path, size: int, *, others: bool) -> int:
    """Write about ``size`` bytes of log; returns the number of iteration lines."""
    n = 0
    written = 0
    with open(path, "w") as fh:
        while written < size:
            block = []
            for _ in range(2000):
                n += 1
                ms = 5300.0 + (n * 7919 % 200)
                block.append(ITERATION.format(rank="rank15", mm=(n // 60) % 60, ss=n % 60, i=n, total=10**8,
                                              cs=n * 512, ms=ms, tf=243.6 - (n % 13) / 10, loss=1.8 + (n % 97) / 1000,
                                              gn=1.0 + (n % 31) / 100))
                if others:
                    for k in range(10):
                        g = (n + k) % 8
                        block.append(OTHERS[(n + k) % len(OTHERS)].format(
                            s=ms / 1000, tf=243.6, r=(n + k) % 16, g=g, h=(g + 1) % 8, ms=ms * 0.9, ms2=ms * 0.92,
                            i=n, mem=150 + (n % 50)))
            text = "\n".join(block) + "\n"
            fh.write(text)
            written += len(text)
    return n


CHILD = """
import json, resource, sys, time
from analysis.parse import parse_files
t0, c0 = time.perf_counter(), time.process_time()
log = parse_files([sys.argv[1]])
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0 + kids.ru_utime + kids.ru_stime,
                  "peak_rss_mb": max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, kids.ru_maxrss) / 1024,
                  "iterations": len(log.series), "damaged": log.damaged_lines, "markers": log.marker_counts}))
"""


def _parse_once(path: Path, root: Path) -> dict:
    """One parse of ``path`` in a fresh process with the ``analysis`` package of ``root``, then ``grep -c``."""
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], cwd=root, capture_output=True, text=True,
                         env=child_env(root), check=True)
    result = json.loads(out.stdout)
    t0 = time.perf_counter()
    grep = subprocess.run(["grep", "-c", "iteration", str(path)], capture_output=True, text=True)
    result["grep_s"] = time.perf_counter() - t0
    result["grep_count"] = int(grep.stdout.strip() or 0)
    return result


def _median(runs: list[dict]) -> dict:
    runs = sorted(runs, key=lambda r: r["wall_s"])
    median = dict(runs[len(runs) // 2])
    median["wall_range"] = (runs[0]["wall_s"], runs[-1]["wall_s"])
    median["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
    return median


def measure(path: Path, repeats: int, roots: list[Path]) -> list[dict]:
    """Parse ``path`` ``repeats`` times with each root's ``analysis`` package (alternating, so that a drift of the
    machine's speed hits every root alike), each in a fresh process followed by ``grep -c iteration``: per root,
    the median run by parse time, with the range of parse times and the largest RSS."""
    runs: list[list[dict]] = [[] for _ in roots]
    for _ in range(repeats):
        for i, root in enumerate(roots):
            runs[i].append(_parse_once(path, root))
    return [_median(r) for r in runs]


def child_env(tree: Path, **extra: str) -> dict[str, str]:
    """The environment of a benchmarked process of ``tree``: its folder first on ``PYTHONPATH``, ahead of what
    the caller's ``PYTHONPATH`` holds (a site folder of the libraries, as on the lent GPU), and bytecode written
    as Python does by default (a shell with ``PYTHONDONTWRITEBYTECODE`` would compile every module of ``tree``
    in every run, which no user's second run does)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**env, **extra}


def baseline_tree(rev: str, folder: Path, *paths: str) -> Path:
    """``paths`` of git revision ``rev`` (default the ``analysis`` package; none given with ``folder`` alone: use
    ``"."`` for the whole tree) extracted under ``folder``; ``rev`` may instead name a folder that holds such a
    tree, used as it is. Raises SystemExit with git's message when ``rev`` is neither a folder nor a revision of
    this repository. Shared by the benchmarks' ``--against``."""
    if Path(rev).is_dir():  # a tree extracted before (a machine without this repository's .git, the lent GPU)
        return Path(rev).resolve()
    res = subprocess.run(["git", "archive", rev, *(paths or ("analysis",))], cwd=REPO, capture_output=True)
    if res.returncode:
        raise SystemExit(f"--against {rev}: not a folder, and git archive refused it as a revision of {REPO}: "
                         f"{res.stderr.decode(errors='replace').strip()}. Give a commit (git log --oneline) or a "
                         "folder that holds an extracted tree")
    archive = res.stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", default="1024", help="sizes of the generated logs in MiB, comma-separated (default 1024)")
    ap.add_argument("--logs", default="typical,iterations", help="which logs: typical, iterations (default both)")
    ap.add_argument("--keep", type=Path, help="generate into this folder and keep the logs")
    ap.add_argument("--repeats", type=int, default=3, help="parses per log, each in a fresh process (default 3); "
                    "the median is shown, with the range (this machine's speed varies from run to run)")
    ap.add_argument("--against", metavar="REV", help="also parse with the analysis package of this git revision "
                    "(runs alternate) and print its speed and the ratio")
    args = ap.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="parse-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="parse-bench-base-")) if args.against else None
    try:
        roots = [REPO] + ([baseline_tree(args.against, base)] if base else [])
        print(f"{'log':<16}{'MB':>7}{'iters':>10}{'MB/s wall':>11}{'(range)':>14}{'MB/s cpu':>10}"
              f"{'peak RSS MB':>13}{'grep MB/s':>11}{'grep/parse':>12}")
        for mib, kind in itertools.product([int(x) for x in args.mb.split(",")], args.logs.split(",")):
            name, others = f"{kind}{mib}.log", kind == "typical"
            path = folder / name
            if not path.exists():
                generate(path, mib << 20, others=others)
            mb = path.stat().st_size / (1 << 20)
            results = measure(path, max(1, args.repeats), roots)
            for label, r in zip([name, f"  {args.against}"][: len(results)], results, strict=True):
                lo, hi = (mb / r["wall_range"][1], mb / r["wall_range"][0])
                print(f"{label[:16]:<16}{mb:>7.0f}{r['iterations']:>10}{mb / r['wall_s']:>11.1f}"
                      f"{f'{lo:.0f}-{hi:.0f}':>14}{mb / r['cpu_s']:>10.1f}{r['peak_rss_mb']:>13.0f}"
                      f"{mb / r['grep_s']:>11.0f}{r['wall_s'] / r['grep_s']:>11.1f}x")
            r = results[0]
            print(f"{'':<16}damaged lines {r['damaged']}, markers {r['markers']}, grep -c iteration {r['grep_count']}")
            if base:
                print(f"{'':<16}speed-up over {args.against}: {results[1]['wall_s'] / r['wall_s']:.2f}x (median wall)")
            sys.stdout.flush()
    finally:
        if args.keep is None:
            for p in folder.iterdir():
                p.unlink()
            folder.rmdir()
        if base:
            shutil.rmtree(base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
