"""``action=cancel`` on the real local Slurm: a packed allocation is stopped whole (no later packed run starts or
is run again by a resume), and a cancel request left by a dead command on another host cancels no later resume."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.cli import run_sweep, tail

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]
BASE = ["cluster=local_slurm", "allow_dirty=true", "poll_s=1"]
SMALL = ["sweep=full", "dispatcher=alltoall", "overlap=on", "delay_wgrad=off"]


def _m(d: Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


def _attempts(d: Path) -> list[dict]:
    return [a for v in _m(d)["variants"] if v["status"] != "pruned" for a in v["attempts"]]


def _request(out: Path, age_s: float) -> None:
    """A cancel request as ``action=cancel`` writes it, by a command on another host (its pid cannot be checked)."""
    since = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=age_s)
    (out / "cancel.json").write_text(json.dumps({"host": "login2.example", "pid": 4242, "start": None,
                                                 "since": since.replace(microsecond=0).isoformat().replace("+00:00", "Z")}))


@pytest.mark.megatron
@pytest.mark.slow
def test_a_request_left_on_another_host_does_not_cancel_a_later_resume(tmp_path):
    out = tmp_path / "s"
    res = run_sweep([*BASE, *SMALL, "action=plan", f"output_dir={out}"])
    assert res.returncode == 0, tail(res)
    sid = _m(out)["sweep_id"]
    _request(out, age_s=600)  # its writer gave up long ago (it waits 120 s for the lease)
    res = run_sweep([*BASE, "action=run", f"sweep_id={sid}", f"output_dir={out}"])
    assert res.returncode == 0, tail(res)
    assert "note: removed the cancel request of action=cancel (pid 4242 on login2.example" in res.stderr, tail(res)
    assert not (out / "cancel.json").exists()
    assert {a["status"] for a in _attempts(out)} == {"succeeded"}


@pytest.mark.megatron
@pytest.mark.slow
def test_a_fresh_request_from_another_host_still_stops_the_conductor_and_says_how_to_clear_it(tmp_path):
    out = tmp_path / "s"
    res = run_sweep([*BASE, *SMALL, "action=plan", f"output_dir={out}"])
    assert res.returncode == 0, tail(res)
    sid = _m(out)["sweep_id"]
    _request(out, age_s=5)  # its writer may still be waiting for the lease: honoured
    res = run_sweep([*BASE, "action=run", f"sweep_id={sid}", f"output_dir={out}"])
    assert res.returncode == 130, tail(res)
    assert f"can be cleared by removing {out / 'cancel.json'}" in res.stderr, tail(res)


def _first_step_running(job_id: str, timeout_s: float = 600) -> str:
    """The name of the first packed run whose srun step runs in allocation ``job_id``."""
    end = time.time() + timeout_s
    while time.time() < end:
        rows = subprocess.run(["squeue", "-h", "-s", "-j", job_id, "-o", "%i|%j"], capture_output=True,
                              text=True).stdout.splitlines()
        steps = [r.split("|")[1] for r in rows if "." in r.split("|")[0] and r.split("|")[1].startswith("a2a")]
        if steps:
            return steps[0]
        time.sleep(1)
    queue = subprocess.run(["squeue", "-o", "%i %j %T %R"], capture_output=True, text=True).stdout
    raise AssertionError(f"no packed run of {job_id} started within {timeout_s} s; the queue:\n{queue}")


@pytest.mark.megatron
@pytest.mark.slow
def test_cancel_of_a_packed_sweep_stops_its_allocation_and_no_later_run_starts(tmp_path):
    out = tmp_path / "s"
    res = run_sweep([*BASE, "sweep=full", "dispatcher=alltoall", "overlap=on,off", "delay_wgrad=off", "pack=true",
                     "payload.hold_s=90", "payload.hold_at=start", "detach=true", "collect_job=false",
                     f"output_dir={out}"])
    assert res.returncode == 0, tail(res)
    jobs = {a["job_id"] for a in _attempts(out)}
    assert len(jobs) == 1, jobs  # both runs in one allocation
    (job,) = jobs
    first = _first_step_running(job)
    sid = _m(out)["sweep_id"]
    res = run_sweep([*BASE, "action=cancel", f"sweep_id={sid}", f"output_dir={out}"])
    assert res.returncode == 0, tail(res)
    assert "cancelled 2 unfinished run(s)" in res.stdout, tail(res)
    end = time.time() + 60
    while time.time() < end and subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True).stdout.strip():
        time.sleep(1)
    assert not subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True).stdout.strip(), \
        "the allocation still runs: the next packed run started after the cancel"
    steps = subprocess.run(["sacct", "-n", "-P", "-j", job, "-o", "JobName,State"], capture_output=True,
                           text=True).stdout.splitlines()
    later = [s for s in steps if s.startswith("a2a") and not s.startswith(first + "|")]
    assert not any(s.endswith("|COMPLETED") or s.endswith("|RUNNING") for s in later), steps
    assert {a["status"] for a in _attempts(out)} == {"cancelled"}


@pytest.mark.megatron
@pytest.mark.slow
def test_cancel_of_a_detached_sweep_whose_jobs_ended_keeps_their_results_for_the_collect(tmp_path):
    """A detached sweep's jobs end while no conductor watches (the manifest still says submitted): a later
    action=cancel asks the scheduler first, leaves the ended runs for the collect instead of marking them
    cancelled, and the collect then records them (a resume would otherwise run them again)."""
    out = tmp_path / "s"
    res = run_sweep([*BASE, f"output_dir={out}", "sweep=full", "dispatcher=alltoall", "overlap=off,on",
                     "delay_wgrad=off", "detach=true", "collect_job=false"])
    assert res.returncode == 0, tail(res)
    jobs = [str(a["job_id"]) for a in _attempts(out)]
    deadline = time.time() + 600
    while time.time() < deadline:
        states = subprocess.run(["sacct", "-X", "-n", "-P", "-j", ",".join(jobs), "-o", "State"],
                                capture_output=True, text=True).stdout.split()
        if len(states) == len(jobs) and all(s == "COMPLETED" for s in states):
            break
        time.sleep(2)
    assert {a["status"] for a in _attempts(out)} == {"submitted"}  # nobody has looked since they were queued
    sweep_id = _m(out)["sweep_id"]
    res = run_sweep(["action=cancel", f"sweep_id={sweep_id}", f"output_dir={out}"])
    assert res.returncode == 0, tail(res)
    assert res.stdout.count("its job had ended (COMPLETED); action=collect records it") == 2, res.stdout
    assert not any("cancelled_by_user" in (a.get("flags") or []) for a in _attempts(out))
    res = run_sweep(["action=collect", f"sweep_id={sweep_id}", f"output_dir={out}"])
    assert res.returncode == 0, tail(res)
    assert {a["status"] for a in _attempts(out)} == {"succeeded"}
    assert {r["status"] for r in json.loads((out / "report" / "summary.json").read_text())["runs"]} == {"validated"}
