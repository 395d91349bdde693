"""Typed job handles and scheduler states: what the launchers return to the conductor (docs/CONTRACTS.md §4).

A launcher never reads the manifest. It returns a :class:`JobHandle` per submitted run, which the conductor records
in the attempt (``job_id``, ``job_dir``, ``pack_step``, ``host_dir``) and hands back on a later poll, cancel or
collect, and a :class:`JobState` per poll.
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts.statuses import ManifestStatus


@dataclass(frozen=True)
class JobHandle:
    """One submitted run as the launcher knows it.

    ``task``: the run's :attr:`contracts.records.RunRef.task`; ``job_id``: the Slurm job id or NeMo-Run experiment
    id; ``job_dir``: the job's folder on this machine (logs, ``out/``); ``pack_step``: the srun step name inside a
    packed allocation (``pack=true``), else None; ``host_dir``: the job folder on the cluster over an SSH tunnel
    (empty on a login node); ``script``: the text submitted (job.sh), when this process submitted it; ``pid`` and
    ``pid_start``: a local job's process (the leader of its session) and its start time in clock ticks since boot
    (:mod:`contracts.procfs`), so that a later process can tell whether it still runs and stop it.
    """

    task: str
    job_id: str
    job_dir: str | None = None
    pack_step: str | None = None
    host_dir: str = ""
    script: str | None = None
    pid: int | None = None
    pid_start: int | None = None

    def record(self) -> dict[str, str | int]:
        """The attempt fields that let another process find this job again (status, collect, resume)."""
        out: dict[str, str | int] = {"job_id": self.job_id}
        if self.job_dir:
            out["job_dir"] = self.job_dir
        if self.pack_step:
            out["pack_step"] = self.pack_step
        if self.host_dir:
            out["host_dir"] = self.host_dir
        if self.pid:
            out["pid"] = self.pid
            if self.pid_start is not None:
                out["pid_start"] = self.pid_start
        return out


@dataclass(frozen=True)
class JobState:
    """The scheduler's view of one run at one poll.

    ``status``: the manifest status; ``state``: the scheduler's own word (Slurm ``COMPLETED``, ``TIMEOUT``,
    ``CANCELLED``...; ``UNKNOWN`` when nobody knows the job); ``exit_code`` and ``signal`` from sacct's ``ExitCode``
    (``2:0``), None while unknown; ``elapsed_s``: seconds run so far; ``nodes``: the node list; ``reason``: why it
    waits or ended (squeue/sacct Reason, or the launcher's note).
    """

    status: ManifestStatus
    job_id: str | None = None
    state: str = ""
    exit_code: int | None = None
    signal: int | None = None
    elapsed_s: int | None = None
    nodes: str = ""
    reason: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", ManifestStatus(self.status))

    @property
    def final(self) -> bool:
        """True once the job can no longer change (succeeded, failed, cancelled, timeout, lost)."""
        return self.status.final
