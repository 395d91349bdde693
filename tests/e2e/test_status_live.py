"""``action=status`` is live on the real local Slurm: it asks squeue and sacct (one call each for
every job of the sweep), never writes the manifest, and reads iteration and step time from the logs wherever they
are (the job folder of a running job, not only collected logs). The sweep and its collect run the real CLI in a
process of their own (tests/e2e/cli.py); the status runs in this process, which counts the scheduler calls it makes."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path

import pytest

import launchers.shell as shell_mod
from experiments.sweep import main
from tests.e2e.cli import run_sweep, tail

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]
# megatron where a job validates its run: the payload imports Megatron-Core inside the Slurm job
BASE = ["cluster=local_slurm", "allow_dirty=true", "poll_s=1", "sweep=full", "dispatcher=alltoall",
        "overlap=on,off", "delay_wgrad=off"]


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _jobs(out: Path) -> list[str]:
    m = json.loads((out / "manifest.json").read_text())
    return [a["job_id"] for v in m["variants"] for a in v["attempts"]]


def _wait(job_ids: list[str], state: str | None, timeout_s: float = 240) -> list[str]:
    """Until some job is in ``state`` (returns those) or, with None, until none is queued any more."""
    end = time.time() + timeout_s
    while time.time() < end:
        rows = subprocess.run(["squeue", "-h", "-j", ",".join(job_ids), "-o", "%i|%T"], capture_output=True,
                              text=True).stdout.split()
        if state is None and not rows:
            return []
        hits = [r.split("|")[0] for r in rows if r.endswith(f"|{state}")]
        if state and hits:
            return hits
        time.sleep(1)
    raise AssertionError(f"jobs {job_ids} not {state or 'gone'} within {timeout_s} s")


@pytest.mark.megatron
@pytest.mark.slow
def test_status_asks_the_scheduler_reads_running_logs_and_writes_nothing(tmp_path, capsys, monkeypatch):
    out = tmp_path / "s"
    res = run_sweep([*BASE, f"output_dir={out}", "detach=true", "collect_job=false", "payload.hold_s=25", "payload.hold_at=end"])
    assert res.returncode == 0, tail(res)
    jobs = _jobs(out)
    assert len(jobs) == 2
    running = _wait(jobs, "RUNNING")[0]  # the two jobs may run one after the other (GPUs of the test node)
    # a running job's log in its job folder, as Megatron prints it (the validate payload logs no iterations)
    m = json.loads((out / "manifest.json").read_text())
    att = next(a for v in m["variants"] for a in v["attempts"] if a["job_id"] == running)
    logs = []
    for _ in range(60):
        logs = list(Path(att["job_dir"]).glob(f"log-*_{running}_0.out"))
        if logs:
            break
        time.sleep(1)
    (log,) = logs
    with open(log, "a") as f:
        f.write(" [2026-12-01 10:00:00] iteration        7/      30 | consumed samples: 448 | "
                "elapsed time per iteration (ms): 812.4 | learning rate: 1.0E-04 |\n")
    calls: list[str] = []

    def counting(argv, timeout_s=60):
        calls.append(argv[0])
        return shell_mod.local_shell(argv, timeout_s)
    monkeypatch.setattr(shell_mod, "shell_for", lambda cluster: counting)
    before = _sha(out / "manifest.json")
    sid = m["sweep_id"]
    capsys.readouterr()
    assert main(["action=status", f"sweep_id={sid}", f"output_dir={out}"]) == 0
    text = capsys.readouterr().out
    assert "running" in text and running in text, text
    assert "7/30" in text and "812.4" in text, text
    assert calls.count("squeue") == 1 and calls.count("sacct") == 1, calls
    assert _sha(out / "manifest.json") == before  # read-only
    _wait(jobs, None)
    calls.clear()
    assert main(["action=status", f"sweep_id={sid}", f"output_dir={out}"]) == 0
    text = capsys.readouterr().out
    assert text.count("succeeded") >= 2, text  # sacct's word, although the manifest still says submitted
    assert all(a["status"] == "submitted" for v in json.loads((out / "manifest.json").read_text())["variants"]
               for a in v["attempts"])
    assert calls.count("squeue") == 1 and calls.count("sacct") == 1, calls
    res = run_sweep(["action=collect", f"sweep_id={sid}", f"output_dir={out}", "allow_dirty=true"])
    assert res.returncode == 0, tail(res)
