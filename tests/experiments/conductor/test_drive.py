"""Tracking loop of the conductor with a scripted backend (a unit test: the real backends are exercised by
tests/e2e): suspected hang -> flagged and cancelled with the log kept; a job that vanished -> lost; Ctrl-C on the
local executor -> runs cancelled, exit code 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from analysis.options import Options
from contracts.jobs import JobHandle, JobState
from contracts.sweepdir import SweepDir
from experiments.conductor.progress import Display
from experiments.conductor.tracking import Sweep, track
from experiments.plan import make_plan, write_plan
from tests.experiments.helpers import UnscriptedBackend

REPO = Path(__file__).resolve().parents[3]


@dataclass
class ScriptedBackend(UnscriptedBackend):
    """Jobs that run forever (or vanish), with a log that stops at iteration 3."""

    log: Path
    vanish: bool = False
    max_concurrent: int | None = None
    enforce_time_limit: bool = False
    cancelled: list[str] = field(default_factory=list)

    def launch(self, refs, mode, stage):
        return {r.task: JobHandle(r.task, "42") for r in refs}

    def poll(self, refs):
        return {r.task: JobState("lost" if self.vanish else ("cancelled" if r.task in self.cancelled else "running"),
                                 job_id="42") for r in refs}

    def cancel(self, ref):
        self.cancelled.append(ref.task)

    def log_files(self, ref):
        return [self.log]

    def payload_out(self, ref):
        return self.log.parent / "out"

    def script(self, ref):
        return "#!/bin/bash\necho scripted\n"


@dataclass(frozen=True)
class Settings:
    hang_min_s: float = 0.5
    hang_action: str = "cancel"
    poll_s: float = 0.2


def _track(sweep: Path, backend, runs, settings) -> None:
    sw = Sweep(SweepDir(sweep), backend, settings, Options(), Display("t"), "train", [])
    track(sw, runs)


def _sweep(tmp_path: Path) -> Path:
    plan = make_plan(["action=plan", f"output_dir={tmp_path / 's'}", "sweep=full", "dispatcher=alltoall",
                      "overlap=off", "delay_wgrad=off"])
    return write_plan(plan, [], render=False)


def _log(tmp_path: Path) -> Path:
    p = tmp_path / "run.log"
    p.write_text("".join(f" iteration {i}/ 30 | elapsed time per iteration (ms): 100.0 | lm loss: 1.0 |\n"
                         for i in (1, 2, 3)))
    return p


def _attempt(sweep: Path) -> dict:
    m = json.loads((sweep / "manifest.json").read_text())
    return m["variants"][0]["attempts"][0]


def test_suspected_hang_is_flagged_cancelled_and_its_log_kept(tmp_path):
    sweep, backend = _sweep(tmp_path), ScriptedBackend(_log(tmp_path))
    t0 = time.time()
    _track(sweep, backend, [("a2a.ovl0.dw0", 0)], Settings())
    assert time.time() - t0 < 30
    a = _attempt(sweep)
    assert a["status"] == "cancelled" and "suspected_hang" in a["flags"]
    assert backend.cancelled == ["a2a.ovl0.dw0.r0.a1"]
    kept = list((sweep / "variants" / "a2a.ovl0.dw0" / "attempt-1" / "logs").iterdir())
    assert kept and "iteration 3/ 30" in kept[0].read_text()


def test_flag_only_hang_action_does_not_cancel(tmp_path):
    sweep, backend = _sweep(tmp_path), ScriptedBackend(_log(tmp_path), vanish=False)

    seen: list[int] = []

    def poll(refs):  # the job ends by itself after a few polls
        seen.append(1)
        return {r.task: JobState("succeeded" if len(seen) > 15 else "running", job_id="42") for r in refs}

    backend.poll = poll
    # 15 polls of 0.1 s: the job runs three times as long as the hang threshold (0.5 s) before it ends
    _track(sweep, backend, [("a2a.ovl0.dw0", 0)], Settings(hang_action="flag", poll_s=0.1))
    a = _attempt(sweep)
    assert a["status"] == "succeeded" and "suspected_hang" in a["flags"] and backend.cancelled == []


def test_job_that_vanished_is_lost(tmp_path):
    sweep, backend = _sweep(tmp_path), ScriptedBackend(_log(tmp_path), vanish=True)
    _track(sweep, backend, [("a2a.ovl0.dw0", 0)], Settings())
    assert _attempt(sweep)["status"] == "lost"


@pytest.mark.slow  # a sweep CLI on the local executor
def test_ctrl_c_on_local_cancels_runs_and_exits_130(tmp_path):
    out = tmp_path / "s"
    cmd = [sys.executable, "-m", "experiments.sweep", f"output_dir={out}", "sweep=full", "dispatcher=alltoall",
           "overlap=off", "delay_wgrad=off", "payload.hold_s=120", "payload.hold_at=start", "poll_s=0.5"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, COLUMNS="200"))
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            m = out / "manifest.json"
            if m.exists():
                atts = json.loads(m.read_text())["variants"][0]["attempts"]
                if atts and atts[0]["status"] in ("submitted", "running"):
                    break
            time.sleep(0.5)
        time.sleep(3)
        proc.send_signal(signal.SIGINT)
        text, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, text[-2000:]
    a = json.loads((out / "manifest.json").read_text())["variants"][0]["attempts"][0]
    assert a["status"] == "cancelled" and "interrupted" in a["flags"]
    # the final table is drawn after the cancel: its row of the run reads cancelled, not running
    last_row = text[text.rindex("a2a.ovl0.dw0"):].splitlines()[0]
    assert "cancelled" in last_row and "running" not in last_row, text[-2000:]
    last = text.rstrip().splitlines()[-1]  # the code's meaning, then what the sweep is now
    assert last.startswith("exit code 130: interrupted: sweep ") and "is cancelled: 1 of 1 run(s) cancelled" in last, \
        last


def test_masked_secrets_come_from_the_environment_on_resume(monkeypatch):
    import pytest

    from experiments.conductor.backends import job_cluster
    from experiments.config import ConfigError

    cluster = {"executor": "slurm", "env_vars": {"HF_TOKEN": "***", "TAG": "a b"}}
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="Export HF_TOKEN"):
        job_cluster(cluster)
    assert job_cluster(cluster, strict=False)["env_vars"]["HF_TOKEN"] == "***"
    monkeypatch.setenv("HF_TOKEN", "value-from-shell")
    assert job_cluster(cluster)["env_vars"] == {"HF_TOKEN": "value-from-shell", "TAG": "a b"}


def test_each_poll_round_writes_the_manifest_once(tmp_path, monkeypatch):
    """One typed Manifest write per round: the number of writes is bounded by the rounds, not by the changes."""
    from contracts.manifest import Manifest

    sweep, backend = _sweep(tmp_path), ScriptedBackend(_log(tmp_path))
    polls: list[int] = []

    def poll(refs):
        polls.append(1)
        return {r.task: JobState("succeeded" if len(polls) > 3 else "running", job_id="42") for r in refs}

    backend.poll = poll
    writes: list[int] = []
    save = Manifest.save

    def counting_save(self, sd):
        writes.append(1)
        return save(self, sd)

    monkeypatch.setattr(Manifest, "save", counting_save)
    _track(sweep, backend, [("a2a.ovl0.dw0", 0)], Settings(hang_min_s=600))
    # one write adds the attempt, one records the submission, then at most one per poll round
    assert len(writes) <= 2 + len(polls), (len(writes), len(polls))
    assert _attempt(sweep)["status"] == "succeeded"


def test_local_polls_start_short_and_a_validate_batch_stays_under_its_cap():
    from types import SimpleNamespace

    from experiments.conductor.tracking import VALIDATE_POLL_CAP_S, poll_interval

    def sweep(local: bool, batch: bool, poll_s: float = 2.0):
        backend = SimpleNamespace(enforce_time_limit=local, batch_validate=batch)
        return SimpleNamespace(backend=backend, settings=SimpleNamespace(poll_s=poll_s))

    train = [poll_interval(sweep(True, False), k) for k in range(1, 8)]
    assert train[0] == 0.1 and train == sorted(train) and train[-1] == 2.0
    validate = [poll_interval(sweep(True, True), k) for k in range(1, 8)]
    assert validate[0] == 0.1 and max(validate) == VALIDATE_POLL_CAP_S < 2.0
    assert poll_interval(sweep(True, True, poll_s=0.2), 7) == 0.2  # poll_s below the cap wins
    assert {poll_interval(sweep(False, False), k) for k in (1, 5)} == {2.0}  # Slurm: poll_s from the start


@pytest.mark.slow
def test_the_conductor_imports_no_statistics_before_its_jobs_start():
    # scipy and matplotlib (1-2 s) are imported by analysis.api.preload while the first jobs run, not at start-up
    code = ("import sys, experiments.sweep, experiments.plan, experiments.blocks, experiments.conductor.drive, "
            "experiments.conductor.analyse; "
            "bad = sorted(m for m in ('scipy', 'matplotlib', 'sqlalchemy') if m in sys.modules); "
            "from analysis.api import preload; preload(plots=True); "
            "print(bad, 'scipy' in sys.modules and 'matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.stdout.split() == ["[]", "True"], out.stdout + out.stderr
