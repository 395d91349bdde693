"""Find the local jobs a conductor started but did not live to record (killed between the launch and its manifest
write; docs/CONTRACTS.md §4), so that a resume adopts them instead of starting them twice.

A local job's folder is named after its run: ``<sweep>/nemo_run/experiments/<title>/<exp_id>/<task>/`` for a job of
its own (the experiment id is the job id), and ``<sweep>/nemo_run/validate/<batch>/<task>/`` for a run of a validate
batch, which the batch's ``runs.json`` or ``more-<n>.json`` lists. Its process, if it still runs, is the session
leader on this host whose command line names the folder (the job's ``out/`` or the batch's runs.json), read from
``/proc/<pid>/cmdline``.
"""

from __future__ import annotations

import json
from pathlib import Path

from contracts.jobs import JobHandle
from contracts.procfs import cmdline, pids, process_start, read_stat
from contracts.records import RunRef


def _leaders() -> dict[int, list[str]]:
    """Session leaders of this host (pid == session id) and their command lines."""
    out: dict[int, list[str]] = {}
    for pid in pids():
        st = read_stat(pid)
        if st is None or st.state == "Z" or st.sid != pid:
            continue
        argv = cmdline(pid)
        if argv is not None:
            out[pid] = argv
    return out


def _pid_naming(leaders: dict[int, list[str]], word: str) -> int | None:
    hits = [pid for pid, argv in leaders.items() if any(word in a for a in argv)]
    return min(hits) if hits else None


def _batch_entries(root: Path) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for f in [root / "runs.json", *sorted(root.glob("more-*.json"))]:
        try:
            out += list(json.loads(f.read_text()).get("runs") or [])
        except (OSError, ValueError, AttributeError):
            continue
    return out


def find_local_jobs(sweep_dir: Path, refs: list[RunRef]) -> dict[str, JobHandle]:
    """The jobs of ``refs`` (by task) that a process of this sweep started on this host, newest first when a run
    was started more than once; a job whose process has ended is returned too (its exit record, or its absence,
    decides its state: :mod:`launchers.adopted`)."""
    home = Path(sweep_dir) / "nemo_run"
    leaders = _leaders()
    found: dict[str, JobHandle] = {}
    for ref in refs:
        dirs = sorted(home.glob(f"experiments/*/*/{ref.task}"), key=lambda p: p.stat().st_mtime)
        if dirs:
            job = dirs[-1]
            pid = _pid_naming(leaders, str(job / "out"))
            found[ref.task] = JobHandle(ref.task, job.parent.name, job_dir=str(job), pid=pid,
                                        pid_start=process_start(pid) if pid else None)
            continue
        for root in sorted(home.glob("validate/*/"), key=lambda p: p.stat().st_mtime, reverse=True):
            if any(Path(str(e.get("log", ""))).parent.name == ref.task for e in _batch_entries(root)):
                pid = _pid_naming(leaders, str(root / "runs.json"))
                found[ref.task] = JobHandle(ref.task, root.name, job_dir=str(root / ref.task), pid=pid,
                                            pid_start=process_start(pid) if pid else None)
                break
    return found
