"""Two (here four) collect steps writing into one SQLite history at once lose and corrupt nothing."""

from __future__ import annotations

import sqlite3

import pytest

from analysis.history import judge_night
from analysis.history.synthetic import SyntheticSeries, simulate_series
from tests.analysis.history.concurrent import record_concurrently, table_counts
from tests.analysis.history.helpers import write_sweep_dir


@pytest.mark.slow  # four recording processes
def test_concurrent_collect_steps_on_sqlite(tmp_path, sqlite_url):
    inputs = simulate_series(SyntheticSeries(), 6, seed=3)
    folders = [write_sweep_dir(tmp_path / "results", n) for n in inputs]
    record_concurrently(sqlite_url, folders, workers=4)
    counts = table_counts(sqlite_url)
    assert counts == {"sweeps": 6, "runs": 6 * 12, "steps": 6 * 12 * 40, "speedups": 6 * 3, "duplicate_runs": 0,
                      "orphan_steps": 0}
    with sqlite3.connect(tmp_path / "history.db") as c:
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert judge_night(sqlite_url).night == inputs[-1].sweep.night
