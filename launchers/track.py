"""Scheduler-side state of submitted jobs, as manifest statuses (CONTRACTS §4).

Sources, in order: ``squeue`` for jobs still in the queue (sacct lags right after submission), then ``sacct``
(slurmdbd: the final state and exit code). A job known to neither, once past a grace period after its submission,
is ``lost``. NeMo-Run's own status goes through torchx, which reports TIMEOUT as FAILED (FACTS §5); sacct is read
directly here so ``timeout`` survives. Slurm's word is not the final verdict on a run: the analysis stage also reads
the log (CASES C08). Log files: NeMo-Run's ``log-<job name>_<jobid>_<restart>.out`` (all ranks, one per restart)
and ``sbatch_<job name>_<jobid>.out`` (the batch script's trace, ending with "job exited with code N").
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from contracts.jobs import JobState
from contracts.slurm import manifest_status
from contracts.statuses import ManifestStatus
from launchers.errors import SchedulerError
from launchers.shell import Result, Shell, local_shell

LOST_GRACE_S = 120.0  # sacct may not know a job for a while after sbatch returns (slurmdbd lag)


def _exit(text: str) -> tuple[int | None, int | None]:
    code, _, sig = text.partition(":")
    try:
        return int(code), int(sig or 0)
    except ValueError:
        return None, None


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _both(shell: Shell, first: list[str], second: list[str]) -> tuple[Result, Result]:
    """The results of two commands; on this machine (``local_shell``) they run at the same time, each about 50 ms
    of waiting for slurmctld or slurmdbd; through a tunnel one after the other."""
    if shell is not local_shell:
        return shell(first), shell(second)
    box: list[Result | BaseException] = []

    def run() -> None:
        try:
            box.append(shell(second))
        except BaseException as exc:  # noqa: BLE001  (re-raised in the caller's thread below)
            box.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        res = shell(first)
    finally:
        worker.join()
    if isinstance(box[0], BaseException):
        raise box[0]
    return res, box[0]


def check_accounting(shell: Shell = local_shell) -> None:
    """Slurm accounting answers (one ``sacct`` call). How a job ended comes from sacct (squeue forgets it at the
    end), so a cluster without slurmdbd would leave every run ``submitted`` until the conductor's outage window ran
    out; a sweep checks this before its first submission instead.

    Raises:
        SchedulerError: sacct failed (accounting disabled, slurmdbd down, not on PATH), with sacct's own words.
    """
    res = shell(["sacct", "-X", "-n", "-P", "-j", "1", "-o", "JobID"])
    if res.rc != 0:
        raise SchedulerError(f"sacct does not answer ({res.err.strip() or f'exit {res.rc}'}): a Slurm sweep reads how "
                             "each job ended from Slurm accounting (slurmdbd), so nothing was submitted. Start "
                             "slurmdbd (AccountingStorageType=accounting_storage/slurmdbd) or ask the cluster's "
                             "admins, then run again")


def query(job_ids: Sequence[str], shell: Shell = local_shell) -> dict[str, JobState]:
    """The current :class:`JobState` of each known job id (unknown ids are absent). One squeue, one sacct call
    (at the same time on this machine: :func:`_both`).

    Raises:
        SchedulerError: squeue or sacct failed for another reason than unknown ids (e.g. slurmdbd down), or is
            not on PATH; squeue's error is raised first.
    """
    ids = [str(j) for j in job_ids]
    if not ids:
        return {}
    out: dict[str, JobState] = {}
    res, acct = _both(shell, ["squeue", "-h", "-j", ",".join(ids), "-o", "%i|%T|%r|%M|%N"],
                      ["sacct", "-X", "-n", "-P", "-j", ",".join(ids),
                       "-o", "JobID,State,ExitCode,ElapsedRaw,NodeList,Reason"])
    if res.rc != 0 and "Invalid job id" not in res.err:
        raise SchedulerError(f"squeue failed: {res.err.strip()}")
    for line in res.out.splitlines():
        job, state, reason, _, nodes = (line.split("|") + [""] * 5)[:5]
        if job in ids:
            out[job] = JobState(manifest_status(state), job, state, nodes=nodes, reason=reason)
    if acct.rc != 0:
        raise SchedulerError(f"sacct failed (is slurmdbd up?): {acct.err.strip()}")
    for line in acct.out.splitlines():
        job, state, code, elapsed, nodes, reason = (line.split("|") + [""] * 6)[:6]
        if job not in ids or (job in out and not manifest_status(state).final):
            continue  # the queue's view of a live job is fresher than the accounting record
        exit_code, sig = _exit(code)
        out[job] = JobState(manifest_status(state), job, state, exit_code, sig, _int(elapsed), nodes, reason)
    return out


def find_by_name(names: Sequence[str], shell: Shell = local_shell, *,
                 under: str | Path | None = None) -> dict[str, tuple[str, str]]:
    """Job name -> (newest job id, its batch script's path) of the jobs called ``names`` whose batch script lies
    inside the folder ``under`` (every job when None), from sacct's SubmitLine and squeue's command (one call each).
    Used to find a job whose submission was never recorded. The folder filter comes before "newest": sweeps of the
    same variants use the same job names, and another sweep's newer job must not hide this sweep's own.

    Raises:
        SchedulerError: squeue or sacct failed.
    """
    if not names:
        return {}
    found: dict[str, tuple[str, str]] = {}
    res = shell(["sacct", "-X", "-n", "-P", "-S", "now-7days", "--name", ",".join(names), "-o", "JobID,JobName,SubmitLine"])
    if res.rc != 0:
        raise SchedulerError(f"sacct failed (is slurmdbd up?): {res.err.strip()}")
    rows = [line.split("|")[:3] for line in res.out.splitlines() if line.count("|") >= 2]
    rows = [[job, name, (line.split() or [""])[-1]] for job, name, line in rows]  # sbatch ... <script>
    res = shell(["squeue", "-h", "-n", ",".join(names), "-o", "%i|%j|%o"])
    if res.rc != 0:
        raise SchedulerError(f"squeue failed: {res.err.strip()}")
    rows += [line.split("|")[:3] for line in res.out.splitlines() if line.count("|") >= 2]
    folder = None if under is None else Path(under)
    for job, name, work in sorted(rows, key=lambda r: _int(r[0]) or 0):
        if name in names and (folder is None or folder in Path(work).parents):
            found[name] = (job, work)
    return found


def states(
    submitted: dict[str, float], shell: Shell = local_shell, *, now: float | None = None,
    grace_s: float = LOST_GRACE_S,
) -> dict[str, JobState]:
    """:func:`query` for ``{job_id: submission time (epoch s)}``, filling in jobs nobody knows.

    An unknown job is still ``submitted`` within ``grace_s`` seconds of its submission, ``lost`` after.
    """
    now = time.time() if now is None else now
    known = query(list(submitted), shell)
    for job, t in submitted.items():
        if job not in known:
            status = ManifestStatus.SUBMITTED if now - t < grace_s else ManifestStatus.LOST
            known[job] = JobState(status, job, "UNKNOWN", reason="not in squeue or sacct")
    return known


def wait(
    job_ids: Iterable[str], shell: Shell = local_shell, *, timeout_s: float = 600, poll_s: float = 2.0,
    on_poll: Callable[[dict[str, JobState]], None] | None = None,
) -> dict[str, JobState]:
    """Poll until every job is final or ``timeout_s`` seconds pass; returns the last states.

    ``on_poll`` sees every poll's states (for a live display).
    """
    start = time.time()
    submitted = {str(j): start for j in job_ids}
    while True:
        current = states(submitted, shell)
        if on_poll:
            on_poll(current)
        if all(s.final for s in current.values()) or time.time() - start >= timeout_s:
            return current
        time.sleep(poll_s)


def _log_pattern(job_id: str) -> re.Pattern[str]:
    jid = re.escape(str(job_id))
    return re.compile(rf"^(log-.*_{jid}_\d+|sbatch_.*_{jid})\.out$")


def log_files(job_dir: str | Path, job_id: str) -> list[Path]:
    """Every log file of Slurm job ``job_id`` in its NeMo-Run task folder, restarts included, sorted.

    ``log-<job name>_<jobid>_<restart>.out`` (rank output, one per restart) and ``sbatch_<job name>_<jobid>.out``
    (the batch script), matched at the end of the name so that job 5 never picks up job 15's files.
    """
    folder = Path(job_dir)
    if not folder.is_dir():
        return []
    pattern = _log_pattern(job_id)
    return sorted(p for p in folder.iterdir() if p.is_file() and pattern.match(p.name))


def fetch_log_files(host_dir: str, job_id: str, dest: str | Path, shell: Shell = local_shell) -> list[Path]:
    """The log files of ``job_id`` on this machine: read in place on a login node (``dest`` unused), copied from
    the cluster's ``host_dir`` into ``dest`` over SSH (a :class:`launchers.shell.TunnelShell`).

    Raises:
        SchedulerError: the remote folder cannot be listed or a file cannot be copied.
    """
    if getattr(shell, "get", None) is None:
        return log_files(host_dir, job_id)
    fetch_files(host_dir, dest, shell, _log_pattern(job_id).match)
    return log_files(dest, job_id)


def fetch_files(host_dir: str, dest: str | Path, shell: Shell, keep: Callable[[str], object]) -> list[Path]:
    """Copy the files of the cluster's folder ``host_dir`` whose names ``keep`` accepts into ``dest`` (over SSH:
    ``shell`` is a :class:`launchers.shell.TunnelShell`); existing copies are replaced (logs grow). Returns them.

    Raises:
        SchedulerError: the remote folder cannot be listed (e.g. it does not exist yet) or a copy failed.
    """
    res = shell(["ls", "-1", host_dir])
    if res.rc != 0:
        raise SchedulerError(f"cannot list {host_dir} on the cluster: {res.err.strip()}")
    Path(dest).mkdir(parents=True, exist_ok=True)
    got = []
    for name in sorted(n for n in res.out.split() if keep(n)):
        got.append(Path(dest) / name)
        shell.get(f"{host_dir.rstrip('/')}/{name}", str(got[-1]))  # type: ignore[attr-defined]
    return got
