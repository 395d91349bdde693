"""Every output path of the project's CLIs (the history database file included), given wrongly, is a clear error and never a traceback: a folder named
as the file to write, or a path under an existing file, exits 2 naming the value before anything is read; a place
that cannot be written (a read-only file system) exits 5 "... was not written (Read-only file system)". The real
CLIs, as subprocesses: ``python -m analysis.history trend --out`` / ``judge --json``, ``python -m analysis.report
--out``, ``scripts/chromium/trend_screenshots.py --out``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from analysis.history import record_summary
from analysis.history.synthetic import SyntheticSeries, simulate_series
from tests.analysis.history.helpers import GOLDEN_SWEEP
from tests.e2e.cli import REPO, read_only_view

LOG = REPO / "tests" / "analysis" / "fixtures" / "h200_mbridge_tiny_moe_baseline.log"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=300,
                          check=False)


def _refused(res: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    said = f"exit {res.returncode}\nstderr: {res.stderr[-3000:]}\nstdout: {res.stdout[-1000:]}"
    assert res.returncode == code, said
    assert "Traceback" not in res.stderr, said
    for w in words:
        assert w in res.stderr, said


@pytest.fixture
def history(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    for night in simulate_series(SyntheticSeries(), 4, seed=9):
        record_summary(url, night)
    return url


@pytest.mark.slow  # several CLI processes
def test_history_output_paths_are_checked_and_their_write_errors_named(history, tmp_path):
    series = str(SyntheticSeries().series)
    afile = tmp_path / "afile"
    afile.write_text("x")
    before = sorted(p.name for p in tmp_path.iterdir())
    for flag, cmd in (("--out", ["trend", "--series", series]), ("--json", ["judge"])):
        for bad in (str(tmp_path), f"{tmp_path}/"):  # a folder named as the file: no temp file at the root
            res = _cli("-m", "analysis.history", *cmd, "--url", history, flag, bad)
            _refused(res, 2, f"{flag} {bad!r} is a folder, not a file")
        res = _cli("-m", "analysis.history", *cmd, "--url", history, flag, str(afile / "x"))
        _refused(res, 2, f"{flag} {afile / 'x'}: {afile} is a file, not a folder")
    golden = str(GOLDEN_SWEEP)
    for cmd in (["record", golden], ["trend", "--out", str(tmp_path / "t.html")]):  # the database file itself
        res = _cli("-m", "analysis.history", *cmd, "--url", f"sqlite:///{tmp_path}")
        _refused(res, 2, f"history.url {str(tmp_path)!r} is a folder, not a file")
        res = _cli("-m", "analysis.history", *cmd, "--url", f"sqlite:///{afile / 'h.db'}")
        _refused(res, 2, f"history.url {afile / 'h.db'}: {afile} is a file, not a folder")
    res = _cli("-m", "experiments.sweep", "action=plan", "history.enabled=true", f"history.url=sqlite:///{tmp_path}",
               f"output_dir={tmp_path / 'sweep'}")  # the sweep refuses it at plan time, not after its runs
    _refused(res, 2, f"history.url {str(tmp_path)!r} is a folder, not a file")
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
    (tmp_path / "pages").mkdir()
    with read_only_view(tmp_path / "pages", tmp_path / "ro") as ro:
        res = _cli("-m", "analysis.history", "trend", "--series", series, "--url", history, "--out",
                   str(ro / "t.html"))
        _refused(res, 5, f"the trend page {ro / 't.html'} was not written (Read-only file system)")
        res = _cli("-m", "analysis.history", "judge", "--url", history, "--json", str(ro / "j.json"))
        _refused(res, 5, f"--json {ro / 'j.json'} was not written (Read-only file system)")
        res = _cli("-m", "analysis.history", "record", golden, "--url", f"sqlite:///{ro / 'h.db'}")
        _refused(res, 5, f"{ro / 'h.db'} cannot be created or written (Read-only file system)")
    res = _cli("-m", "analysis.history", "trend", "--series", series, "--url", history, "--out",
               str(tmp_path / "new" / "t.html"))
    assert res.returncode == 0 and (tmp_path / "new" / "t.html").stat().st_size > 20_000, res.stderr


@pytest.mark.slow  # several CLI processes
def test_report_and_screenshot_output_folders_are_checked_and_their_write_errors_named(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    res = _cli("-m", "analysis.report", str(LOG), "--out", str(afile / "report"))
    _refused(res, 2, f"--out {afile / 'report'}: {afile} is a file, not a folder")
    res = _cli(str(REPO / "scripts" / "chromium" / "trend_screenshots.py"), "--out", str(afile))
    _refused(res, 2, f"--out {afile} is a file, not a folder")
    res = _cli(str(REPO / "scripts" / "chromium" / "trend_screenshots.py"), "--out", str(afile / "img"))
    _refused(res, 2, f"--out {afile / 'img'}: {afile} is a file, not a folder")
    (tmp_path / "reports").mkdir()
    with read_only_view(tmp_path / "reports", tmp_path / "ro") as ro:
        res = _cli("-m", "analysis.report", str(LOG), "--out", str(ro / "r"))
        _refused(res, 5, f"the report {ro / 'r'} was not written (Read-only file system)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "reports", "ro"]
