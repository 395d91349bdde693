"""GPU-hours from Slurm accounting: what each job really held, as ``sacct`` reports it.

One call for all the jobs: ``sacct -j <ids> --format=JobID,ElapsedRaw,AllocTRES --parsable2 --noheader`` (through
:mod:`launchers.shell`, so it works on a login node and over SSH alike). Only the allocation lines count (JobID
without a ``.``: the ``.batch``/``.extern``/``.N`` step lines run inside it and would count it twice). A job's
GPU-hours are ``ElapsedRaw`` (s) x the GPUs in ``AllocTRES`` (``gres/gpu=N``; a typed ``gres/gpu:h100=N`` is used
when the untyped entry is absent) / 3600. Slurm documents both fields in sacct(1) (``ElapsedRaw``: elapsed seconds;
``AllocTRES``: the trackable resources allocated, e.g. ``billing=2,cpu=2,gres/gpu=2,mem=4G,node=1``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from launchers.errors import SchedulerError
from launchers.shell import Shell, local_shell

_GPU = re.compile(r"^gres/gpu(?::[^=]+)?=(\d+)$")
_JOB_ID = re.compile(r"^\d+(?:_\d+)?(?:\+\d+)?$")


@dataclass(frozen=True, kw_only=True)
class JobUsage:
    """One job's accounting: ``elapsed_s`` (s), ``gpus`` allocated, ``gpu_hours`` = elapsed_s x gpus / 3600."""

    job_id: str
    elapsed_s: int
    gpus: int
    alloc_tres: str

    @property
    def gpu_hours(self) -> float:
        return self.elapsed_s * self.gpus / 3600.0


def gpus_of(alloc_tres: str) -> int:
    """GPUs in an AllocTRES string: ``gres/gpu=N``, else the sum of typed ``gres/gpu:<type>=N``; 0 when none."""
    untyped, typed = None, 0
    for item in alloc_tres.split(","):
        m = _GPU.match(item.strip())
        if m:
            if item.strip().startswith("gres/gpu="):
                untyped = int(m.group(1))
            else:
                typed += int(m.group(1))
    return untyped if untyped is not None else typed


def parse_sacct(text: str) -> dict[str, JobUsage]:
    """The allocation lines of ``sacct --format=JobID,ElapsedRaw,AllocTRES --parsable2 --noheader`` output.

    Raises:
        SchedulerError: a line that is not three ``|``-separated fields (names the line).
    """
    out: dict[str, JobUsage] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != 3:
            raise SchedulerError(f"sacct gave a line that is not JobID|ElapsedRaw|AllocTRES: {line!r}")
        job, elapsed, tres = (p.strip() for p in parts)
        if "." in job or not _JOB_ID.match(job):
            continue
        out[job] = JobUsage(job_id=job, elapsed_s=int(elapsed) if elapsed.isdigit() else 0, gpus=gpus_of(tres),
                            alloc_tres=tres)
    return out


def job_usage(job_ids: Sequence[str], shell: Shell = local_shell, timeout_s: float = 60) -> dict[str, JobUsage]:
    """Accounting of ``job_ids`` (jobs sacct does not know are absent from the result).

    Raises:
        SchedulerError: sacct is missing or failed (e.g. slurmdbd down), or its output is malformed.
    """
    ids = sorted({str(j) for j in job_ids if j})
    if not ids:
        return {}
    res = shell(["sacct", "-j", ",".join(ids), "--format=JobID,ElapsedRaw,AllocTRES", "--parsable2", "--noheader"],
                timeout_s=timeout_s)
    if res.rc != 0:
        raise SchedulerError(f"sacct failed (is slurmdbd up?): {res.err.strip()}")
    return parse_sacct(res.out)
