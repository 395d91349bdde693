"""Issue 13 item 3: ``action=status`` is live on the real local Slurm: it asks squeue and sacct (one call each for
every job of the sweep), never writes the manifest, and reads iteration and step time from the logs wherever they
are (the job folder of a running job, not only collected logs)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path

import pytest

import launchers.shell as shell_mod
from experiments.sweep import main

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]
BASE = ["cluster=local_slurm", "allow_dirty=true", "poll_s=1", "sweep=full", "dispatcher=alltoall",
        "overlap=on,off", "delay_wgrad=off"]


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _jobs(out: Path) -> list[str]:
    m = json.loads((out / "manifest.json").read_text())
    return [a["job_id"] for v in m["variants"] for a in v["attempts"]]


def _wait(job_ids: list[str], state: str | None, timeout_s: float = 180) -> None:
    end = time.time() + timeout_s
    while time.time() < end:
        q = subprocess.run(["squeue", "-h", "-j", ",".join(job_ids), "-o", "%T"], capture_output=True,
                           text=True).stdout.split()
        if (state is None and not q) or (state and q.count(state) == len(job_ids)):
            return
        time.sleep(1)
    raise AssertionError(f"jobs {job_ids} not {state or 'gone'} within {timeout_s} s")


def test_status_asks_the_scheduler_reads_running_logs_and_writes_nothing(tmp_path, capsys, monkeypatch):
    out = tmp_path / "s"
    assert main([*BASE, f"output_dir={out}", "detach=true", "payload.hold_s=25", "payload.hold_at=end"]) == 0
    jobs = _jobs(out)
    assert len(jobs) == 2
    _wait(jobs, "RUNNING")
    # a running job's log in its job folder, as Megatron prints it (the validate payload logs no iterations)
    m = json.loads((out / "manifest.json").read_text())
    att = next(a for v in m["variants"] for a in v["attempts"])
    log = Path(att["job_dir"]) / f"log-moe.{att['task']}_{att['job_id']}_0.out"
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
    assert text.count("running") >= 2, text
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
    assert main(["action=collect", f"sweep_id={sid}", f"output_dir={out}", "allow_dirty=true"]) == 0
