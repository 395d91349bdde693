"""`python -m analysis.history record|judge|trend`: messages and exit codes (CONTRACTS §5)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from analysis.history import record_summary
from analysis.history.synthetic import SyntheticSeries, simulate_series
from tests.analysis.history.concurrent import REPO
from tests.analysis.history.helpers import GOLDEN_SWEEP, write_sweep_dir


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "analysis.history", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.mark.slow  # several CLI processes
def test_record_judge_trend_exit_codes(tmp_path):
    url = f"sqlite:///{tmp_path / 'h.db'}"
    nights = simulate_series(SyntheticSeries(), 8, seed=9, tonight={"a2a.ovl1.dw0": 1.15})
    for night in nights[:-1]:
        record_summary(url, night)
    folder = write_sweep_dir(tmp_path / "results", nights[-1])
    res = _cli("record", str(folder), "--url", url)
    assert res.returncode == 0 and f"recorded sweep {folder.name}" in res.stdout, res.stderr
    res = _cli("judge", "--url", url, "--json", str(tmp_path / "report.json"))
    assert res.returncode == 4, res.stdout + res.stderr
    assert "a2a.ovl1.dw0                 step_time_ms  regression" in res.stdout
    assert "warning: judging night" not in res.stdout  # the latest night is the one judged
    assert json.loads((tmp_path / "report.json").read_text())["regressions"] == [
        ["a2a.ovl1.dw0", "step_time_ms"], ["a2a.ovl1.dw0", "speedup"]]
    res = _cli("judge", "--url", url, "--night", "2026-11-07")
    assert res.returncode == 0 and "warning: judging night 2026-11-07" in res.stdout, res.stdout
    res = _cli("trend", "--url", url, "--out", str(tmp_path / "t.html"))
    assert res.returncode == 0 and (tmp_path / "t.html").stat().st_size > 20_000


@pytest.mark.slow  # several CLI processes
def test_bad_input_is_exit_2_and_bad_database_exit_5(tmp_path):
    res = _cli("record", str(tmp_path / "missing"), "--url", f"sqlite:///{tmp_path / 'h.db'}")
    assert res.returncode == 2 and "summary.json not found" in res.stderr
    res = _cli("judge", "--url", f"sqlite:///{tmp_path / 'h.db'}", "--window", "0")
    assert res.returncode == 2 and "history.window=0" in res.stderr
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"garbage" * 1000)
    res = _cli("record", str(GOLDEN_SWEEP), "--url", f"sqlite:///{corrupt}")
    assert res.returncode == 5 and "not a readable SQLite database" in res.stderr
