"""The files never disagree with the process's exit code: when the history step fails after the analysis, the
sweep exits 5 and report.md, report.html and summary.json say so; a night that one action=cancel stopped after a
run had started is not recorded (and the report says why). A scripted backend whose one run ends with a real
Megatron log; the analysis and the history store are the real ones."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from analysis.options import Options
from contracts.jobs import JobHandle, JobState
from contracts.manifest import Manifest
from contracts.sweepdir import SweepDir
from experiments import timeline
from experiments.conductor import drive as drive_mod
from experiments.plan import make_plan, write_plan
from tests.experiments.conductor.test_drive_final import DoneBackend, Settings
from tests.experiments.helpers import train_without_gpu

LOG = Path(__file__).resolve().parents[2] / "analysis" / "fixtures" / "h200_mbridge_tiny_moe_baseline.log"


@pytest.fixture(autouse=True)
def _train_here(monkeypatch: pytest.MonkeyPatch) -> None:
    train_without_gpu(monkeypatch)


@dataclass
class GoodBackend(DoneBackend):
    """Every job succeeds at its first poll; its log is the real tiny_moe baseline log of an H200 run."""

    logs: Path | None = None
    only: str | None = None  # the one task that has the log (None: every task)

    def launch(self, refs, mode, stage):
        return {r.task: JobHandle(r.task, "8") for r in refs}

    def poll(self, refs):
        return {r.task: JobState("succeeded", job_id="8", exit_code=0) for r in refs}

    def log_files(self, ref):
        return [self.logs / "baseline.log"] if self.only in (None, ref.task) else []


def _sweep(tmp_path, monkeypatch):
    timeline.reset()
    plan = make_plan(["action=plan", f"output_dir={tmp_path / 's'}", "sweep=full", "dispatcher=alltoall",
                      "overlap=off", "delay_wgrad=off", "mode=train"])
    root = write_plan(plan, [], render=False)
    logs = tmp_path / "job"
    logs.mkdir()
    shutil.copy(LOG, logs / "baseline.log")
    backend = GoodBackend(logs=logs)
    backend.root = root
    monkeypatch.setattr(drive_mod, "make_backend", lambda sd, m, cluster=None: backend)
    return SweepDir(root)


def test_a_failing_history_step_is_the_exit_code_of_the_files_too(tmp_path, monkeypatch, capsys):
    sd = _sweep(tmp_path, monkeypatch)
    # a place no database can be made in (/proc takes no new folder, even for root): the store fails, exit 5 (a
    # path under a file would be a bad URL, exit 2, refused at plan time)
    hist = {"enabled": True, "url": "sqlite:////proc/no-such-folder/h.db"}
    rc = drive_mod.drive(sd, Settings(), Options(), resume=False, history=hist)
    err = capsys.readouterr().err
    assert rc == 5, err[-2000:]
    summary = json.loads((sd.report / "summary.json").read_text())
    assert summary["exit_code"] == 5 and summary["analysis_exit_code"] == 0
    assert [a["step"] for a in summary["after"]] == ["history"] and summary["after"][0]["exit_code"] == 5
    md = (sd.report / "report.md").read_text()
    assert ("Exit code 5: scheduler or infrastructure error, from the history step after the analysis, which wrote "
            "this report (the analysis alone: exit code 0)") in md
    assert "Exit code 0" not in md
    assert "Exit code 5" in (sd.report / "report.html").read_text()
    assert list(sd.report.glob("*.png")), "the plots were lost when the report was written again"


def test_a_good_history_step_leaves_exit_0_and_says_it_recorded(tmp_path, monkeypatch):
    sd = _sweep(tmp_path, monkeypatch)
    rc = drive_mod.drive(sd, Settings(), Options(), resume=False,
                         history={"enabled": True, "url": f"sqlite:///{tmp_path / 'h.db'}"})
    assert rc == 0
    summary = json.loads((sd.report / "summary.json").read_text())
    assert summary["exit_code"] == 0 and "recorded as series" in summary["after"][0]["text"]
    assert "the history step (exit code 0): recorded as series" in (sd.report / "report.md").read_text()


def test_a_night_cancelled_after_a_run_started_is_not_recorded(tmp_path, monkeypatch, capsys):
    """Two planned runs: the first ended with its log, the second was cancelled by action=cancel."""
    timeline.reset()
    plan = make_plan(["action=plan", f"output_dir={tmp_path / 's'}", "sweep=full", "dispatcher=alltoall",
                      "overlap=off", "delay_wgrad=off", "mode=train", "repeats=2"])
    sd = SweepDir(write_plan(plan, [], render=False))

    def one_ran_one_cancelled(m):
        (n0, r0), (n1, r1) = m.runs
        a = m.variant(n0).new_attempt(r0)
        a.set(status="succeeded", job_id="8")
        b = m.variant(n1).new_attempt(r1)
        b.set(status="submitted", job_id="9")
        b.set(status="cancelled", add_flags=["cancelled_by_user"])
    Manifest.update(sd, one_ran_one_cancelled)
    first = Manifest.load(sd).refs()[0]
    sd.logs(first).mkdir(parents=True)
    shutil.copy(LOG, sd.logs(first) / "baseline.log")
    backend = GoodBackend(logs=sd.logs(first), only=first.task)
    backend.root = sd.root
    monkeypatch.setattr(drive_mod, "make_backend", lambda sd, m, cluster=None: backend)
    db = tmp_path / "h.db"
    rc = drive_mod.drive(sd, Settings(), Options(), resume=True, collect_only=True,
                         history={"enabled": True, "url": f"sqlite:///{db}"})
    err = capsys.readouterr().err
    assert "history: not recorded: the night was cancelled (1 run(s)" in err, err[-2000:]
    assert not db.exists() and not sd.history_json.exists()
    summary = json.loads((sd.report / "summary.json").read_text())
    assert summary["exit_code"] == rc == 3  # the cancelled run is a bad run: never "good"
    assert "not recorded: the night was cancelled" in (sd.report / "report.md").read_text()
