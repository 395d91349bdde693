"""Issue 13 item 5: an empty or cancelled night is neither reported as good nor recorded in history."""

from __future__ import annotations

import json

import pytest

from contracts.manifest import Manifest
from contracts.sweepdir import SweepDir
from experiments.sweep import main

NIGHTLY = ["action=plan", "sweep=nightly", "cluster=local_slurm", "allow_dirty=true", "repeats=1"]


def _collect(out, tmp_path):
    db = tmp_path / "h.db"
    rc = main(["action=collect", f"output_dir={out}", f"sweep_id={Manifest.load(out).sweep_id}",
               f"history.url=sqlite:///{db}", "allow_dirty=true"])
    return rc, db


@pytest.mark.slow
def test_collect_of_a_sweep_where_no_job_ran_is_not_good_and_not_recorded(tmp_path, capsys):
    out = tmp_path / "s"
    assert main([*NIGHTLY, f"output_dir={out}"]) == 0
    capsys.readouterr()
    rc, db = _collect(out, tmp_path)
    captured = capsys.readouterr()
    assert rc == 3
    assert "every kept run is good" not in captured.out + captured.err
    assert "history: not recorded" in captured.err
    assert not db.exists() and not SweepDir(out).history_json.exists()
    report = (out / "report" / "report.md").read_text()
    assert "no kept run ran" in report


def test_runs_cancelled_while_pending_read_cancelled_and_are_not_a_night(tmp_path, capsys):
    out = tmp_path / "s"
    assert main([*NIGHTLY, f"output_dir={out}"]) == 0

    def cancelled(m):  # what action=cancel records for pending jobs (no job ever wrote a log)
        for n, r in m.runs:
            a = m.variant(n).new_attempt(r)
            a.set(status="submitted", job_id=str(900000 + len(n)))
            a.set(status="cancelled", add_flags=["cancelled_by_user"])
    Manifest.update(SweepDir(out), cancelled)
    capsys.readouterr()
    rc, db = _collect(out, tmp_path)
    err = capsys.readouterr().err
    assert rc == 3 and "history: not recorded" in err and not db.exists()
    runs = json.loads((out / "report" / "summary.json").read_text())["runs"]
    kept = [r for r in runs if r["status"] != "pruned"]
    assert kept and {(r["status"], r["reason"]) for r in kept} == {("cancelled", "cancelled")}
    assert all("logs_unavailable" not in (r["reason"] or "") for r in runs)
