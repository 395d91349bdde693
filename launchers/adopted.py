"""Local jobs of a conductor that died (SIGKILL, an OOM kill), found again by a later process (docs/CONTRACTS.md §4).

A local job runs in a session of its own (torchx's local scheduler starts it with ``start_new_session=True``), so
it outlives its conductor and goes on writing its logs. The conductor records the job's process (pid and start
time, :mod:`contracts.procfs`) and folder with its job id; a later process reads the job's state from them:

- an exit record says how it ended: a validate batch's ``exit.json`` for the run (:mod:`launchers.validate_batch`),
  else the payload's last line ``[payload] exit <code>`` in the job's logs (:mod:`experiments.payload.cli`);
- without one, the process still running (same pid, same start time) means the job runs;
- without either, the job died without a word (killed together with its conductor, or by the OOM killer): ``lost``,
  which a resume submits again.

torchx copies a job's stdout.log and stderr.log into combined.log with a thread of the conductor, which died with it,
so an adopted job's logs are the two files themselves.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from contracts.jobs import JobHandle, JobState
from contracts.procfs import process_alive
from contracts.statuses import ManifestStatus
from launchers.procs import stop_group

EXIT_LINE = re.compile(rb"\[payload\] exit (-?\d+)")
TAIL_BYTES = 65536  # the end of a log read for the exit line (it is the payload's last line)


def _batch_exit(job: Path) -> int | None:
    try:
        return int(json.loads((job / "exit.json").read_text())["exit_code"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _tail(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - TAIL_BYTES))
            return f.read()
    except OSError:
        return b""


def is_batch(handle: JobHandle) -> bool:
    """True for a run of a local validate batch (its folder sits beside the batch's runs.json)."""
    return handle.job_dir is not None and bool(handle.job_dir) and (Path(handle.job_dir).parent / "runs.json").exists()


def log_files(handle: JobHandle) -> list[Path]:
    """The adopted job's logs: the run's own log of a validate batch, else the job's stdout.log and stderr.log
    (combined.log only when neither exists)."""
    if not handle.job_dir:
        return []
    job = Path(handle.job_dir)
    if is_batch(handle):
        log = job / f"{handle.task}.log"
        return [log] if log.exists() else []
    files = sorted(job.rglob("*.log")) if job.exists() else []
    own = [f for f in files if f.name in ("stdout.log", "stderr.log")]
    return own or files


def exit_code(handle: JobHandle) -> int | None:
    """The exit record of the adopted job (module docstring), None when it has none yet."""
    if not handle.job_dir:
        return None
    if is_batch(handle):
        return _batch_exit(Path(handle.job_dir))
    codes = [int(m.group(1)) for f in log_files(handle) for m in EXIT_LINE.finditer(_tail(f))]
    if not codes:
        return None
    return next((c for c in codes if c != 0), 0)


def state(handle: JobHandle) -> JobState:
    """The adopted job's state (module docstring); exit codes as a local job reports them."""
    for attempt in range(2):  # the exit record may land between the two looks: read it again after the pid
        code = exit_code(handle)
        if code is not None:
            ok = code == 0
            return JobState(ManifestStatus.SUCCEEDED if ok else ManifestStatus.FAILED, job_id=handle.job_id,
                            state="SUCCEEDED" if ok else "FAILED", exit_code=code)
        if attempt == 0 and process_alive(handle.pid, handle.pid_start):
            return JobState(ManifestStatus.RUNNING, job_id=handle.job_id, state="RUNNING")
    why = "no pid recorded" if not handle.pid else f"process {handle.pid} ended"
    return JobState(ManifestStatus.LOST, job_id=handle.job_id, state="LOST",
                    reason=f"the job of a conductor that died ended without an exit record ({why})")


def cancel(handle: JobHandle) -> bool:
    """Stop the adopted job's process group; True when it was running. A validate batch's process serves every
    run of its batch: the caller cancels each of them, so stopping it once is enough."""
    return handle.pid is not None and handle.pid > 0 and stop_group(handle.pid, handle.pid_start)
