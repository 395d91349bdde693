"""Local jobs of a conductor that died (launchers/adopted.py, launchers/procs.py): their state from the recorded
process and exit records, and cancelling them by their process group."""

from __future__ import annotations

import json
import subprocess

from contracts.jobs import JobHandle
from contracts.procfs import process_alive, process_start
from launchers import adopted


def _job(tmp_path, text: str | None) -> JobHandle:
    job = tmp_path / "exp" / "v.r0.a1"
    (job / "v" / "0").mkdir(parents=True)
    if text is not None:
        (job / "v" / "0" / "stdout.log").write_text(text)
    (job / "v" / "0" / "combined.log").write_text("[payload] validate v attempt=1\n")  # its copy thread died
    return JobHandle("v.r0.a1", "exp-1", job_dir=str(job))


def test_exit_line_decides_a_finished_job(tmp_path):
    h = _job(tmp_path, "[payload] validate v\n[payload] exit 0\n")
    st = adopted.state(h)
    assert (st.status, st.exit_code) == ("succeeded", 0)
    assert [f.name for f in adopted.log_files(h)] == ["stdout.log"]


def test_failed_exit_line(tmp_path):
    st = adopted.state(_job(tmp_path, "[payload] error 16 mismatch: x\n[payload] exit 16\n"))
    assert (st.status, st.exit_code) == ("failed", 16)


def test_running_process_then_cancelled_by_its_group(tmp_path):
    p = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60"], start_new_session=True)
    try:
        h = JobHandle(**{**_job(tmp_path, "[payload] validate v\n").__dict__, "pid": p.pid,
                         "pid_start": process_start(p.pid)})
        assert adopted.state(h).status == "running"
        assert adopted.cancel(h)
        p.wait(timeout=10)
        assert not process_alive(p.pid)
        st = adopted.state(h)
        assert st.status == "lost" and f"process {p.pid} ended" in st.reason
        assert not adopted.cancel(h)  # already ended: nothing stopped
    finally:
        if p.poll() is None:
            p.kill()


def test_dead_without_exit_record_is_lost_and_a_reused_pid_is_not_the_job(tmp_path):
    p = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        h = JobHandle(**{**_job(tmp_path, "[payload] validate v\n").__dict__, "pid": p.pid,
                         "pid_start": (process_start(p.pid) or 0) + 7})
        assert adopted.state(h).status == "lost"
        assert not adopted.cancel(h)  # another process now has that pid: never signalled
        assert p.poll() is None
    finally:
        p.kill()
        p.wait()


def test_validate_batch_run_reads_its_exit_file(tmp_path):
    root = tmp_path / "validate" / "validate-s1-1"
    (root / "v.r0.a1").mkdir(parents=True)
    (root / "runs.json").write_text(json.dumps({"runs": []}))
    h = JobHandle("v.r0.a1", "exp-1", job_dir=str(root / "v.r0.a1"))
    assert adopted.is_batch(h) and adopted.state(h).status == "lost"
    (root / "v.r0.a1" / "exit.json").write_text(json.dumps({"exit_code": 0}))
    assert adopted.state(h).status == "succeeded"
