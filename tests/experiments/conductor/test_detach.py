"""Detaching: a local sweep never detaches (its jobs belong to the conductor's process), whatever its mode; a
detached Slurm sweep queues its collect behind its jobs in flight and records it. Scripted backends; the planner,
the manifest and the analysis are the real ones."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from analysis.options import Options
from contracts.jobs import JobHandle, JobState
from contracts.manifest import Manifest
from contracts.sweepdir import SweepDir
from experiments import timeline
from experiments.conductor import drive as drive_mod
from experiments.conductor.backends import make_backend
from experiments.conductor.chain import RECORD
from experiments.plan import make_plan, write_plan
from launchers.errors import SchedulerError
from tests.experiments.conductor.test_drive_final import DoneBackend, Settings


def _plan(tmp_path, *extra):
    plan = make_plan(["action=plan", f"output_dir={tmp_path / 's'}", "sweep=nightly", "dispatcher=alltoall",
                      "overlap=off,on", "delay_wgrad=off", *extra])
    return write_plan(plan, [], render=False)


@dataclass
class LocalValidate(DoneBackend):
    """A local validate batch as the conductor sets it up: every run in flight at once (``max_concurrent=None``),
    and, being local, it does not detach."""

    detaches: bool = False
    max_concurrent: int | None = None


def test_a_local_validate_nightly_runs_in_the_foreground(tmp_path, monkeypatch, capsys):
    timeline.reset()
    root = _plan(tmp_path, "cluster=local", "mode=validate")
    backend = LocalValidate()
    backend.root = root
    monkeypatch.setattr(drive_mod, "make_backend", lambda sd, m, cluster=None: backend)
    rc = drive_mod.drive(SweepDir(root), replace(Settings(), detach=True), Options(), resume=False)
    out, err = capsys.readouterr()
    assert "detached" not in out and "never detaches" in err
    assert rc == 3  # every scripted run failed: tracked, collected and analysed here, not left "submitted"
    m = Manifest.load(SweepDir(root))
    assert {a.status for v in m.variants for a in v.attempts} == {"failed"}
    assert (SweepDir(root).summary_json).exists()


def test_the_real_local_backend_of_a_validate_sweep_does_not_detach(tmp_path):
    root = _plan(tmp_path, "cluster=local", "mode=validate")
    sd = SweepDir(root)
    backend = make_backend(sd, Manifest.load(sd))
    try:
        assert backend.max_concurrent is None  # one validate process for all runs ...
        assert backend.detaches is False  # ... and still local
    finally:
        backend.close()


@dataclass
class Queued(DoneBackend):
    """A Slurm-like backend: jobs stay queued (ids 100, 101, ...); the collect job is recorded, or refused."""

    detaches: bool = True
    chains_collect: bool = True
    refuse: bool = False
    chained: list = field(default_factory=list)
    n: int = 100

    def launch(self, refs, mode, stage):
        out = {}
        for r in refs:
            self.n += 1
            out[r.task] = JobHandle(r.task, str(self.n))
        return out

    def poll(self, refs):
        return {r.task: JobState("submitted", job_id="1") for r in refs}

    def submit_collect(self, sweep_id, after, secrets=None, overrides=()):
        if self.refuse:
            raise SchedulerError("sbatch: error: Batch job submission failed: Invalid account")
        self.chained.append((sweep_id, list(after)))
        self.secrets = dict(secrets or {})
        return JobHandle("collect", "999", job_dir="/x/collect")


def _detached(tmp_path, monkeypatch, backend, **settings):
    timeline.reset()
    root = _plan(tmp_path, "cluster=local_slurm", "allow_dirty=true")
    backend.root = root
    monkeypatch.setattr(drive_mod, "make_backend", lambda sd, m, cluster=None: backend)
    rc = drive_mod.drive(SweepDir(root), replace(Settings(), detach=True, **settings), Options(), resume=False)
    return rc, root


@dataclass(frozen=True)
class NoChain(Settings):
    collect_job: bool = False


def test_a_detached_slurm_sweep_chains_its_collect_behind_every_job(tmp_path, monkeypatch, capsys):
    backend = Queued()
    rc, root = _detached(tmp_path, monkeypatch, backend)
    assert rc == 0
    m = Manifest.load(SweepDir(root))
    ids = [str(a.job_id) for v in m.variants for a in v.attempts]
    assert len(ids) == 6 and backend.chained == [(m.sweep_id, ids)]
    record = json.loads((root / RECORD).read_text())
    assert record["job_id"] == "999" and record["after"] == ids and record["dependency"] == "afterany"
    assert "collect chained: Slurm job 999" in capsys.readouterr().out


def test_collect_job_false_chains_nothing(tmp_path, monkeypatch):
    backend = Queued()
    timeline.reset()
    root = _plan(tmp_path, "cluster=local_slurm", "allow_dirty=true")
    backend.root = root
    monkeypatch.setattr(drive_mod, "make_backend", lambda sd, m, cluster=None: backend)
    settings = NoChain(detach=True)
    assert drive_mod.drive(SweepDir(root), settings, Options(), resume=False) == 0
    assert backend.chained == [] and not (root / RECORD).exists()


def test_a_refused_collect_job_warns_and_keeps_the_queued_runs(tmp_path, monkeypatch, capsys):
    backend = Queued(refuse=True)
    rc, root = _detached(tmp_path, monkeypatch, backend)
    assert rc == 0  # the runs are queued; only their collect is left to a later action=collect
    err = capsys.readouterr().err
    assert "the collect job was not queued" in err and "Invalid account" in err and "action=collect" in err
    assert not (root / RECORD).exists()


def test_status_of_a_local_sweep_reads_each_jobs_own_records(tmp_path, monkeypatch):
    """A local sweep whose manifest still says ``submitted`` (its conductor is gone, or between two of its writes):
    status shows what the jobs' records say, not ``submitted`` for ever; it writes nothing."""
    import subprocess

    from contracts.manifest import ManifestWriter
    from contracts.procfs import process_start
    from experiments.conductor import actions
    from experiments.conductor.progress import Display

    root = _plan(tmp_path, "cluster=local", "mode=validate")
    sd = SweepDir(root)
    batch = sd.nemo_run / "validate" / "validate-s1-1"
    batch.mkdir(parents=True)
    (batch / "runs.json").write_text(json.dumps({"runs": []}))
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        writer = ManifestWriter(sd)
        refs = writer.change(lambda m: [v.new_attempt(r).ref(v.name) for v in m.variants for r in range(2)])
        codes = [0, 16, None, None]  # succeeded, failed, running (its process lives), lost (no process, no record)
        for ref, code in zip(refs, codes, strict=True):
            (batch / ref.task).mkdir()
            if code is not None:
                (batch / ref.task / "exit.json").write_text(json.dumps({"exit_code": code}))
            pid = sleeper.pid if ref == refs[2] else None
            writer.set(ref, status="submitted", job_id="local-exp", job_dir=str(batch / ref.task), pid=pid,
                       pid_start=process_start(pid) if pid else None)
        writer.commit()
        before = (root / "manifest.json").read_bytes()
        shown = {}
        monkeypatch.setattr(Display, "close", lambda self, views: shown.update({v.task: v.state for v in views}))
        assert actions.show_status(sd) == 0
        assert [shown[r.task] for r in refs] == ["succeeded", "failed", "running", "lost"]
        assert (root / "manifest.json").read_bytes() == before  # read-only
    finally:
        sleeper.kill()
        sleeper.wait()
