"""Concurrent collect steps: several processes record overlapping lists of sweep folders at the same moment.

Shared by the SQLite and PostgreSQL tests. Each worker is a real ``python`` process that waits for a common start
time, then records its folders (the same sweep may be recorded by two workers at once).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import create_engine, text

REPO = Path(__file__).resolve().parents[3]
WORKER = """
import sys, time
from analysis.history import record_summary
url, start = sys.argv[1], float(sys.argv[2])
while time.time() < start:
    time.sleep(0.005)
for d in sys.argv[3:]:
    record_summary(url, d, timeout_s=120)
"""


def record_concurrently(url: str, folders: list[Path], workers: int = 4) -> None:
    """Start ``workers`` processes; worker k records every folder (rotated by k, half of them reversed) twice."""
    start = time.time() + 4.0  # after every interpreter has imported the package
    procs = []
    for k in range(workers):
        order = folders[k:] + folders[:k]
        if k % 2:
            order = order[::-1]
        procs.append(subprocess.Popen([sys.executable, "-c", WORKER, url, str(start), *map(str, order * 2)],
                                      cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    errors = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        if p.returncode:
            errors.append(f"worker exit {p.returncode}: {err[-2000:]}")
    assert not errors, "\n".join(errors)


def table_counts(url: str) -> dict[str, int]:
    eng = create_engine(url)
    with eng.connect() as c:
        out = {t: c.execute(text(f"SELECT count(*) FROM {t}")).scalar() for t in ("sweeps", "runs", "steps", "speedups")}
        out["duplicate_runs"] = c.execute(text(
            "SELECT count(*) FROM (SELECT sweep_id, variant, repeat FROM runs GROUP BY sweep_id, variant, repeat "
            "HAVING count(*) > 1) d")).scalar()
        out["orphan_steps"] = c.execute(text(
            "SELECT count(*) FROM steps WHERE run_id NOT IN (SELECT id FROM runs)")).scalar()
    eng.dispose()
    return out
