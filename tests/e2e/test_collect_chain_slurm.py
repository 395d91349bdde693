"""The chained collect on the real local Slurm: a detached nightly queues its collect as a Slurm job behind its
run jobs (``--dependency=afterany``), one of which fails; the collect job starts only after the last run ended, and
the sweep's report, summary, manifest and the collect job's own exit code (3: a run failed) are right, with no
``action=collect`` from any shell."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.cli import run_sweep, tail

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.megatron, pytest.mark.usefixtures("slurm_cluster")]
BASE = ["cluster=local_slurm", "allow_dirty=true", "poll_s=1"]
WAIT_S = 1500  # the local cluster is shared by other tests: the runs and then the collect may queue behind theirs


def _sacct(job: str) -> dict[str, str]:
    line = subprocess.run(["sacct", "-X", "-n", "-P", "-j", job, "-o", "State,ExitCode,Start,End"],
                          capture_output=True, text=True).stdout.strip().splitlines()
    state, code, start, end = (line[0].split("|") + [""] * 4)[:4] if line else ("", "", "", "")
    return {"state": state, "exit": code, "start": start, "end": end}


def _wait_final(job: str) -> dict[str, str]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        acc = _sacct(job)
        if acc["state"] and acc["state"] not in ("PENDING", "RUNNING", "REQUEUED", "COMPLETING"):
            return acc
        time.sleep(3)
    queue = subprocess.run(["squeue", "-o", "%i %j %T %R"], capture_output=True, text=True).stdout
    raise AssertionError(f"collect job {job} not finished within {WAIT_S} s: {_sacct(job)}; queue:\n{queue}")


def test_a_detached_nightly_is_collected_by_its_chained_job_after_a_failed_run(tmp_path):
    out, db = tmp_path / "s", tmp_path / "history.db"
    # expert_model_parallel_size=1: the overlap arm fails in its job (overlap needs expert parallelism)
    res = run_sweep([*BASE, f"output_dir={out}", "sweep=nightly", "preflight=off", "repeats=1",
                     "dispatcher=alltoall", "overlap=on,off", "delay_wgrad=off", "model.expert_model_parallel_size=1",
                     f"history.url=sqlite:///{db}"])
    assert res.returncode == 0, tail(res)
    record = json.loads((out / "collect_job.json").read_text())
    m = json.loads((out / "manifest.json").read_text())
    run_ids = [str(a["job_id"]) for v in m["variants"] for a in v["attempts"]]
    assert len(run_ids) == 2 and record["after"] == run_ids and record["dependency"] == "afterany"
    assert f"collect chained: Slurm job {record['job_id']}" in res.stdout
    job = str(record["job_id"])
    acc = _wait_final(job)
    log = "\n".join(p.read_text(errors="replace")[-3000:] for p in Path(record["job_dir"]).glob("log-*.out"))
    # the collect's exit code is the sweep's: 3, a run failed (Slurm: FAILED, exit 3)
    assert acc["state"] == "FAILED" and acc["exit"] == "3:0", (acc, log)
    ends = [_sacct(j)["end"] for j in run_ids]
    assert all(e and e <= acc["start"] for e in ends), (ends, acc)  # afterany: started after the last run ended
    summary = json.loads((out / "report" / "summary.json").read_text())
    assert summary["exit_code"] == 3, log
    runs = {r["variant"]: r for r in summary["runs"]}
    assert runs["a2a.ovl0.dw0"]["status"] == "validated"
    assert runs["a2a.ovl1.dw0"]["status"] == "failed"
    assert any("expert model parallelism" in e for e in runs["a2a.ovl1.dw0"]["evidence"])
    assert "a2a.ovl1.dw0" in (out / "report" / "report.md").read_text()
    v = {x["name"]: x for x in json.loads((out / "manifest.json").read_text())["variants"]}
    assert [a["status"] for a in v["a2a.ovl1.dw0"]["attempts"]] == ["failed"]
    assert [a["status"] for a in v["a2a.ovl0.dw0"]["attempts"]] == ["succeeded"]
    assert (out / "variants" / "a2a.ovl1.dw0" / "attempt-1" / "logs").is_dir()
    # GPU-hours: the plan's estimate beside what sacct accounted (2 fake GPUs per job on the local cluster)
    for r in runs.values():
        g = r["gpu_hours"]
        assert g["estimate"] > 0 and g["accounted"] is not None and 0 < g["accounted"] <= g["estimate"], g
        assert "x 2 GPU" in g["note"], g
    assert "## GPU-hours (plan estimate, Slurm accounting)" in (out / "report" / "report.md").read_text()


def test_cancel_of_a_detached_sweep_also_cancels_its_chained_collect(tmp_path):
    """action=cancel stops the runs and the collect job queued behind them (it would start when they end and
    collect a cancelled sweep)."""
    out = tmp_path / "s"
    res = run_sweep([*BASE, f"output_dir={out}", "sweep=nightly", "repeats=1", "dispatcher=alltoall",
                     "overlap=on,off", "delay_wgrad=off", "payload.hold_s=120", "payload.hold_at=start"])
    assert res.returncode == 0, tail(res)
    record = json.loads((out / "collect_job.json").read_text())
    job = str(record["job_id"])
    sid = json.loads((out / "manifest.json").read_text())["sweep_id"]
    res = run_sweep(["cluster=local_slurm", "action=cancel", f"sweep_id={sid}", f"output_dir={out}"])
    assert res.returncode == 0, tail(res)
    assert f"stopped the chained collect job {job}" in res.stdout, tail(res)
    assert "cancelled 2 unfinished run(s)" in res.stdout, tail(res)
    acc = _wait_final(job)
    assert acc["state"].startswith("CANCELLED"), acc
    assert not list(Path(record["job_dir"]).glob("log-*.out"))  # it never ran
