"""The one Slurm state map and the one Slurm time-limit parser.

Sources: sbatch(1) ``--time`` ("minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
"days-hours:minutes", "days-hours:minutes:seconds") and sacct(1)/squeue(1) "JOB STATE CODES" (Slurm 23.x-24.x).
"""

from __future__ import annotations

import re

from contracts.errors import ConfigError
from contracts.statuses import ManifestStatus as S

TIME_FORMS = ("MM", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS")
# the cluster's timeouts (s) a manifest attempt records in ``slurm_timeouts`` (read by launchers.slurm_timeouts,
# used by the failure judgement): slurm.conf(5) KillWait, SlurmdTimeout, and the partition's/QOS's GraceTime
TIMEOUT_KEYS = ("kill_wait_s", "slurmd_timeout_s", "grace_time_s")

_DAYS = re.compile(r"^(\d+)-(\d+)(?::(\d+))?(?::(\d+))?$")
_PLAIN = re.compile(r"^(\d+)(?::(\d+))?(?::(\d+))?$")


def _bad(text: str, why: str) -> ConfigError:
    return ConfigError(f"cluster.time_limit={text!r} {why}. Slurm's forms: {', '.join(TIME_FORMS)} "
                       f"(e.g. 30 = 30 minutes, 1-12 = 1 day 12 hours, 00:45:00)")


def parse_time_limit(value: object) -> int:
    """A Slurm time limit in seconds, meaning what sbatch means: ``30`` is 30 minutes, ``30:15`` 30 min 15 s,
    ``1:00:00`` one hour, ``1-12`` 36 hours, ``1-12:30`` 36.5 hours, ``1-00:00:10`` one day and 10 s.

    An int (``cluster.time_limit=30`` on the command line) is minutes, as in sbatch.

    Raises:
        ConfigError: not one of :data:`TIME_FORMS`, a field out of range (minutes or seconds >= 60 after the
            first field, hours >= 24 after a day count), or zero; the message names the forms.
    """
    if isinstance(value, bool) or value is None:
        raise _bad(str(value), "is not a time limit")
    text = str(value).strip()
    if m := _DAYS.match(text):
        days, hours, minutes, seconds = (int(g) if g is not None else 0 for g in m.groups())
        if hours >= 24:
            raise _bad(text, f"has {hours} hours after a day count (at most 23)")
        if minutes >= 60 or seconds >= 60:
            raise _bad(text, "has minutes or seconds of 60 or more")
        total = days * 86400 + hours * 3600 + minutes * 60 + seconds
    elif m := _PLAIN.match(text):
        parts = [int(g) for g in m.groups() if g is not None]
        if len(parts) == 1:
            total = parts[0] * 60
        elif len(parts) == 2:
            if parts[1] >= 60:
                raise _bad(text, f"has {parts[1]} seconds (at most 59)")
            total = parts[0] * 60 + parts[1]
        else:
            h, mi, s = parts
            if mi >= 60 or s >= 60:
                raise _bad(text, "has minutes or seconds of 60 or more")
            total = h * 3600 + mi * 60 + s
    else:
        raise _bad(text, "is not a Slurm time limit")
    if total <= 0:
        raise _bad(text, "must be longer than zero")
    return total


def format_time_limit(seconds: int) -> str:
    """Seconds as sbatch's ``D-HH:MM:SS`` (or ``HH:MM:SS`` under a day), the form written into job.sh."""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    hms = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{hms}" if days else hms


# sacct(1)/squeue(1) JOB STATE CODES -> manifest status. PREEMPTED is not a user's cancel: the job was stopped by
# the scheduler and did not finish, so it is ``failed`` (the analysis names the reason ``preempted``); REQUEUED jobs
# are back in the queue.
STATES: dict[str, S] = {
    "PENDING": S.SUBMITTED, "REQUEUED": S.SUBMITTED, "REQUEUE_HOLD": S.SUBMITTED, "REQUEUE_FED": S.SUBMITTED,
    "RESV_DEL_HOLD": S.SUBMITTED, "SUSPENDED": S.SUBMITTED, "CONFIGURING": S.SUBMITTED, "RESIZING": S.SUBMITTED,
    "POWER_UP_NODE": S.SUBMITTED,
    "RUNNING": S.RUNNING, "COMPLETING": S.RUNNING, "STAGE_OUT": S.RUNNING, "SIGNALING": S.RUNNING,
    "COMPLETED": S.SUCCEEDED,
    "FAILED": S.FAILED, "NODE_FAIL": S.FAILED, "BOOT_FAIL": S.FAILED, "OUT_OF_MEMORY": S.FAILED,
    "PREEMPTED": S.FAILED, "SPECIAL_EXIT": S.FAILED,
    "CANCELLED": S.CANCELLED, "REVOKED": S.CANCELLED,
    "TIMEOUT": S.TIMEOUT, "DEADLINE": S.TIMEOUT,
}


def state_word(state: str) -> str:
    """Slurm's bare state word: ``CANCELLED by 0`` -> ``CANCELLED``, ``COMPLETED+`` -> ``COMPLETED``;
    ``UNKNOWN`` for an empty string."""
    return state.split()[0].rstrip("+").upper() if state.strip() else "UNKNOWN"


def manifest_status(state: str) -> S:
    """The manifest status of a Slurm state (``CANCELLED by 0`` -> cancelled); an unknown word is ``lost``."""
    return STATES.get(state_word(state), S.LOST)
