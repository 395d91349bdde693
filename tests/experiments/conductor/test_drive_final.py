"""drive(): the analysis that finds nothing more to run is the final one (its report is not written twice), and
the command's phase marks land in conductor.json. A scripted backend; the analysis is the real one."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from analysis.options import Options
from contracts.jobs import JobHandle, JobState
from contracts.sweepdir import SweepDir
from experiments import timeline
from experiments.conductor import analyse as analyse_mod
from experiments.conductor import drive as drive_mod
from experiments.plan import make_plan, write_plan
from tests.experiments.helpers import UnscriptedBackend, train_without_gpu


@pytest.fixture(autouse=True)
def _train_here(monkeypatch: pytest.MonkeyPatch) -> None:
    train_without_gpu(monkeypatch)  # the scripted backends run no payload



@dataclass
class DoneBackend(UnscriptedBackend):
    """Every job ends (failed, exit 1) at its first poll."""

    max_concurrent: int | None = None
    enforce_time_limit: bool = False

    def launch(self, refs, mode, stage):
        return {r.task: JobHandle(r.task, "7") for r in refs}

    def poll(self, refs):
        return {r.task: JobState("failed", job_id="7", exit_code=1) for r in refs}

    def cancel(self, ref):
        pass

    def log_files(self, ref):
        return []

    def payload_out(self, ref):
        return SweepDir(self.root).nemo_run / "none"

    def script(self, ref):
        return "#!/bin/bash\n"


@dataclass(frozen=True)
class Settings:
    hang_min_s: float = 600
    hang_action: str = "cancel"
    poll_s: float = 0.05
    detach: bool = False
    max_gpu_hours: float = 1000


def test_one_analysis_at_the_end_and_a_conductor_record(tmp_path, monkeypatch, capsys):
    timeline.reset()  # other tests of this process drove sweeps
    plan = make_plan(["action=plan", f"output_dir={tmp_path / 's'}", "sweep=full", "dispatcher=alltoall",
                      "overlap=off", "delay_wgrad=off", "mode=train"])
    root = write_plan(plan, [], render=False)
    backend = DoneBackend()
    backend.root = root
    monkeypatch.setattr(drive_mod, "make_backend", lambda sd, m, cluster=None: backend)
    calls = []
    real = analyse_mod.report_sweep
    monkeypatch.setattr(analyse_mod, "report_sweep", lambda *a, **k: calls.append(a) or real(*a, **k))
    rc = drive_mod.drive(SweepDir(root), Settings(), Options(), resume=False)
    assert rc == 3  # the run failed
    assert len(calls) == 1, "the report was written more than once"
    assert (SweepDir(root).report / "summary.json").exists()
    err = capsys.readouterr().err
    assert "conductor:" in err and "1 run(s)" in err
    doc = json.loads((root / "conductor.json").read_text())
    (session,) = doc["sessions"]
    assert session["action"] == "run" and session["runs"] == 1
    assert 0 <= session["pre_launch_s"] <= session["wall_s"]
    assert {"drive", "launching", "analysed"} <= set(session["marks"])


def test_a_drive_reads_the_manifest_once_and_writes_it_only_through_its_writer(tmp_path, monkeypatch):
    """The default staged preset with every run failing: launch, poll, collect, analyse, the gate closes. The
    conductor reads manifest.json once (when it opens the sweep) and writes it only through its ManifestWriter,
    one locked write per round."""
    import sys

    from contracts.manifest import Manifest

    plan = make_plan(["action=plan", f"output_dir={tmp_path / 's'}", "mode=train"])
    root = write_plan(plan, [], render=False)
    backend = DoneBackend()
    backend.root = root
    monkeypatch.setattr(drive_mod, "make_backend", lambda sd, m, cluster=None: backend)
    loads, updates = [], []
    real_load, real_update = Manifest.load.__func__, Manifest.update.__func__

    def load(cls, sweep):
        loads.append(sys._getframe(1).f_globals["__name__"])
        return real_load(cls, sweep)

    def update(cls, sweep, change):
        updates.append(sys._getframe(1).f_globals["__name__"])
        return real_update(cls, sweep, change)

    monkeypatch.setattr(Manifest, "load", classmethod(load))
    monkeypatch.setattr(Manifest, "update", classmethod(update))
    assert drive_mod.drive(SweepDir(root), Settings(), Options(), resume=False) == 3
    assert [n for n in loads if n.startswith("experiments.")] == ["experiments.conductor.drive"]
    assert updates and set(updates) == {"contracts.manifest"}  # every write is the writer's
    m = real_load(Manifest, SweepDir(root))
    assert {a.status for v in m.variants for a in v.attempts} == {"failed"}
    assert any(v.status == "skipped" for v in m.variants)  # the gate closed, in the same writer


@dataclass
class OrderBackend(DoneBackend):
    """Records, in order, each finish() and each analysis the drive starts."""

    events: list | None = None

    def finish(self):
        self.events.append("finish")


def _events_of(tmp_path, monkeypatch, args):
    plan = make_plan(["action=plan", f"output_dir={tmp_path / 's'}", "mode=train", *args])
    root = write_plan(plan, [], render=False)
    backend = OrderBackend(events=[])
    backend.root = root
    monkeypatch.setattr(drive_mod, "make_backend", lambda sd, m, cluster=None: backend)
    real = drive_mod.analyse
    monkeypatch.setattr(drive_mod, "analyse", lambda *a, **k: backend.events.append("analyse") or real(*a, **k))
    drive_mod.drive(SweepDir(root), Settings(), Options(), resume=False)
    return backend.events


def test_the_launcher_is_finished_before_the_last_analysis_when_nothing_more_can_launch(tmp_path, monkeypatch):
    """A fixed design with no gated stage: the waiting validate process is told to end before the analysis, so its
    own exit overlaps the analysis instead of following the report."""
    events = _events_of(tmp_path, monkeypatch, ["sweep=full", "dispatcher=alltoall", "overlap=on,off",
                                                "delay_wgrad=off"])
    assert events[:2] == ["finish", "analyse"]


def test_a_gated_stage_keeps_the_launcher_waiting_through_the_analysis_that_opens_it(tmp_path, monkeypatch):
    """The staged preset: the first analysis decides the gate, so the validate process must still be waiting then
    (a gated stage it validates needs no new process); once no gate is left it is finished before the analysis."""
    events = _events_of(tmp_path, monkeypatch, [])
    # every run fails, so the first analysis closes the gate: the launcher is finished only after it
    assert events == ["analyse", "finish"]


def test_more_launches_possible_follows_the_design_and_the_gates(tmp_path):
    from contracts.manifest import Manifest

    fixed = Manifest.load(SweepDir(write_plan(make_plan(["action=plan", f"output_dir={tmp_path / 'a'}", "sweep=full",
                                                         "dispatcher=alltoall"]), [], render=False)))
    staged = Manifest.load(SweepDir(write_plan(make_plan(["action=plan", f"output_dir={tmp_path / 'b'}"]), [],
                                               render=False)))
    adaptive = Manifest.load(SweepDir(write_plan(make_plan(["action=plan", f"output_dir={tmp_path / 'c'}",
                                                            "sweep=full", "dispatcher=alltoall", "repeats=auto"]),
                                                 [], render=False)))
    assert not drive_mod.more_launches_possible(fixed)
    assert drive_mod.more_launches_possible(staged)  # its delay_wgrad stage is gated
    assert drive_mod.more_launches_possible(adaptive)
