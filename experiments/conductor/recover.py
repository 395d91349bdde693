"""Recovering from faults while a sweep runs (docs/CONTRACTS.md §4): a conductor killed around sbatch (attempts
marked ``submitting`` are looked up by job name and adopted, never submitted twice), a scheduler that does not
answer for a while (slurmctld restarting), and the fault-injection hook of tests/e2e/test_faults.py."""

from __future__ import annotations

import sys
import time
from typing import Any

from contracts.manifest import now_iso
from contracts.records import RunRef
from contracts.statuses import ManifestStatus
from experiments.conductor.collect import write_script


class SubmitError(RuntimeError):
    """The scheduler refused a submission or stopped answering (exit code 5); nothing of that batch is left
    queued by this process."""


SCHEDULER_OUTAGE_S = 300.0  # squeue/sacct may fail this long in a row (slurmctld restarting) before exit 5


class Outage:
    """Polls that ride out a scheduler outage: a failing squeue/sacct (slurmctld or slurmdbd restarting) keeps the
    last states and tries again next round; after ``SCHEDULER_OUTAGE_S`` seconds of failures in a row it gives up
    with :class:`SubmitError` (exit 5; on Slurm the jobs go on and ``action=collect`` finishes the sweep)."""

    def __init__(self) -> None:
        self.since: float | None = None

    def poll(self, sw: Any, refs: list[RunRef]) -> dict[str, Any]:
        from launchers.errors import SchedulerError

        if not refs:
            return {}
        try:
            polled = sw.backend.poll(refs)
        except SchedulerError as e:
            now = time.monotonic()
            self.since = self.since or now
            print(f"note: the scheduler did not answer ({e}); trying again", file=sys.stderr)
            if now - self.since > SCHEDULER_OUTAGE_S:
                raise SubmitError(f"the scheduler did not answer for {now - self.since:.0f} s: {e}") from e
            return {}
        self.since = None
        return polled


def adopt_unrecorded(sw: Any, refs: list[RunRef]) -> list[RunRef]:
    """Attempts of ``refs`` marked ``submitting`` (sbatch may have run) whose job id the sweep's manifest
    (``sw.m``, an :class:`experiments.conductor.tracking.Sweep`) lacks: the launcher looks their jobs up by name
    (:meth:`launchers.slurm_backend.SlurmBackend.find_submitted`); found ones are recorded as submitted (one
    manifest write) and tracked, never submitted twice. Returns the adopted refs."""
    m = sw.m
    orphans = [r for r in refs if m.attempt(r).get("submitting") and not m.attempt(r).job_id]
    if not orphans:
        return []
    found = sw.backend.find_submitted(orphans)
    for r in orphans:
        h = found.get(r.task)
        if h is None:
            continue
        sw.writer.set(r, status=ManifestStatus.SUBMITTED, submitted=now_iso(), submitting=None, **h.record())
        write_script(sw.sd, r, h.script)
        sw.views[r.task].state, sw.views[r.task].job_id = "submitted", h.job_id
        sw.started[r.task] = time.monotonic()
        print(f"note: {r.task}: job {h.job_id} was submitted before the last run stopped; adopted, not resubmitted",
              file=sys.stderr)
    sw.writer.commit()
    return [r for r in orphans if r.task in found]
