"""Log-parser benchmark: a whole process that parses one generated log, per size, next to ``grep -c`` and a plain
regex script on the same file.

    .venv/bin/python benchmarks/parse.py [--mb 10,100,1024] [--logs typical,iterations] [--repeats 3]
        [--keep DIR] [--against REV|DIR]

Two logs are generated per size in a temporary folder (or ``--keep DIR``, reused when there):
- ``typical``: a multi-rank Megatron-Bridge log with one iteration line per ten other lines (Step Time, NCCL INFO,
  timers, warnings with ``[rankN]:`` / ``[defaultN]:`` prefixes, memory lines);
- ``iterations``: iteration lines only (one rank's output, the usual long training log).
Each tree's process is ``python -c "from analysis.logs import parse_files; parse_files([LOG])"`` started in that
tree (benchmarks/harness.py): interpreter start and imports are counted. Printed per log and tree: MB/s of the
median wall and CPU time, peak RSS, and (labelled "in-process") the parse call's own MB/s without start and
imports; then this tree's time over the baseline's, measured in the same run. Two references on the same file:
``grep -c iteration`` and a plain regex script (:data:`REGEX_SCRIPT`: every iteration line's step time into a
dict, no damage rules, markers or memory). Prints figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__:
    from benchmarks import harness
else:  # python benchmarks/parse.py: this folder is sys.path[0]
    import harness

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
CHILD = """
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
try:
    from analysis.logs import parse_files
except ImportError:  # a tree from before analysis/ stood in rooms
    from analysis.parse import parse_files
t1, c1 = time.perf_counter(), time.process_time()
log = parse_files([sys.argv[1]])
print(json.dumps({"import_s": t1 - t0, "parse_s": time.perf_counter() - t1, "parse_cpu_s": time.process_time() - c1,
                  "iterations": len(log.series), "damaged": log.damaged_lines, "markers": log.marker_counts}))
"""
REGEX_SCRIPT = r"""
import re, sys
ITER = re.compile(rb"iteration\s+(\d+)/\s*(\d+) \|([^\n]*)")
steps = {}
with open(sys.argv[1], "rb") as fh:
    for m in ITER.finditer(fh.read()):
        fields = dict(f.split(b":", 1) for f in m.group(3).split(b"|") if b":" in f)
        steps[int(m.group(1))] = float(fields[b" elapsed time per iteration (ms)"])
print(len(steps))
"""


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


def _grep_s(path: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(["grep", "-c", "iteration", str(path)], capture_output=True, check=False)
    return time.perf_counter() - t0


def _line(label: str, mb: float, runs: list[harness.Run]) -> str:
    wall, cpu = harness.median(runs), harness.median(runs, "cpu_s")
    inner = sorted((json.loads(r.out) for r in runs), key=lambda d: d["parse_s"])[len(runs) // 2]
    return (f"  {label[:24]:<24} {mb / wall:8.1f} MB/s wall {mb / cpu:8.1f} MB/s CPU ({wall:.2f} s, {cpu:.2f} s CPU)"
            f" {max(r.rss_mb for r in runs):5.0f} MB RSS; in-process parse {mb / inner['parse_s']:.0f} MB/s, "
            f"import {inner['import_s']:.2f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", default="10,100,1024", help="sizes of the generated logs in MiB (default 10,100,1024)")
    ap.add_argument("--logs", default="typical,iterations", help="which logs: typical, iterations (default both)")
    ap.add_argument("--keep", type=Path, help="generate into this folder and keep the logs")
    ap.add_argument("--repeats", type=int, default=3, help="timed processes per log and tree (default 3)")
    harness.add_against(ap)
    a = ap.parse_args()
    print(harness.machine())
    with tempfile.TemporaryDirectory(prefix="parse-bench-") as tmp, harness.trees(a.against) as sides:
        folder = a.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        script = Path(tmp) / "regex_script.py"
        script.write_text(REGEX_SCRIPT)
        for mib, kind in itertools.product([int(x) for x in a.mb.split(",")], a.logs.split(",")):
            path = folder / f"{kind}{mib}.log"
            if not path.exists():
                generate(path, mib << 20, others=kind == "typical")
            mb = path.stat().st_size / (1 << 20)
            runs = harness.alternate(sides, lambda side, p=path: ["-c", CHILD, str(p)], a.repeats)
            first = json.loads(runs[sides[0].label][0].out)
            print(f"{path.name}: {mb:.0f} MB, {first['iterations']} iterations, damaged {first['damaged']}, "
                  f"markers {first['markers']}")
            for side in sides:
                print(_line(side.label, mb, runs[side.label]))
            if len(sides) > 1:
                print(f"  {harness.ratio(runs[sides[0].label], runs[sides[1].label])} (same run)")
            regex = harness.alternate([harness.Tree("regex", sides[0].root)], lambda side, p=path: [str(script), str(p)],
                                      a.repeats, warmup=0)["regex"]
            grep = sorted(_grep_s(path) for _ in range(a.repeats))[a.repeats // 2]
            print(f"  reference: grep -c iteration {mb / grep:.0f} MB/s; plain regex script (no damage rules, markers "
                  f"or memory) {mb / harness.median(regex):.1f} MB/s wall, {mb / harness.median(regex, 'cpu_s'):.1f} "
                  "MB/s CPU")
            sys.stdout.flush()
    print(harness.machine())
    return 0


if __name__ == "__main__":
    sys.exit(main())
