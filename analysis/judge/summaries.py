"""Structured failure summaries: torchrun's ChildFailedError table, the scheduler's final state, and what a signal
means once both are known.

- torchrun (torch/distributed/elastic/multiprocessing/errors/__init__.py, ``ChildFailedError.format_msg``) prints
  ``Failures:`` and ``Root Cause (first observed failure):`` blocks of ``[i]:`` records with ``time``, ``host``,
  ``rank (local_rank: l)``, ``exitcode (pid: p)``, ``error_file`` and ``traceback`` (``Signal 11 (SIGSEGV)
  received by PID p`` when the child died of a signal; a negative exit code is the signal number).
- Slurm's final job state (sacct JOB STATE CODES) names the cause when the log cannot: PREEMPTED / REQUEUED ->
  ``preempted``, OUT_OF_MEMORY -> ``host_oom``, NODE_FAIL / BOOT_FAIL -> ``node_failure``, TIMEOUT / DEADLINE ->
  ``slurm_time_limit``, ``CANCELLED by <uid>`` -> ``cancelled``.
- Signals: SIGSEGV, SIGBUS, SIGILL, SIGFPE are root causes (``killed_by_signal:<NAME>``, before NCCL errors, which
  the other ranks then report). What a soft signal or SIGKILL means depends on the launch context and on what
  came before it: :mod:`analysis.judge.launch_context`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from analysis.logs import Marker, signal_name

HARD_SIGNALS = frozenset({"SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE"})
_STATE_REASONS = {
    "PREEMPTED": "preempted", "REQUEUED": "preempted", "REQUEUE_HOLD": "preempted", "REQUEUE_FED": "preempted",
    "OUT_OF_MEMORY": "host_oom", "NODE_FAIL": "node_failure", "BOOT_FAIL": "node_failure",
    "TIMEOUT": "slurm_time_limit", "DEADLINE": "slurm_time_limit",
}
_FIELD_RE = re.compile(r"^(?:\S+:\s*)?\s*(time|host|rank|exitcode|error_file|traceback)\s*: ?(.*)$")
_RANK_RE = re.compile(r"(-?\d+)\s*\(local_rank:\s*(-?\d+)\)")
_EXIT_RE = re.compile(r"(-?\d+)\s*\(pid:\s*(\d+)\)")
_SIG_RE = re.compile(r"Signal (\d+) \((SIG\w+)\) received by PID")


def scheduler_reason(state: str | None) -> str | None:
    """The reason a raw Slurm state names (``PREEMPTED`` -> preempted ...; see module docstring), else None."""
    if not state or not state.strip():
        return None
    word = state.split()[0].rstrip("+").upper()
    if word == "CANCELLED" and " by " in f" {state} ":
        return "cancelled"
    return _STATE_REASONS.get(word)


def torchrun_failures(markers: Sequence[Marker]) -> list[dict[str, Any]]:
    """The records of torchrun's failure table, in log order; the first root-cause record has ``root_cause``.

    Fields: ``host``, ``rank``, ``local_rank``, ``exitcode``, ``pid``, ``error_file``, ``traceback``, ``signal``
    (from the traceback line or a negative exit code), ``time``. Lines that are not the table are ignored.
    """
    records: list[dict[str, Any]] = []
    in_root = False
    current: dict[str, Any] | None = None
    for m in markers:
        if m.kind not in ("torchrun_summary", "killed_by_signal"):
            continue
        text = m.text
        if "Root Cause (first observed failure)" in text:
            in_root, current = True, None
            continue
        f = _FIELD_RE.match(text)
        if f is None:
            continue
        key, value = f.group(1), f.group(2).strip()
        if current is None or key == "time" or key in current:
            current = {"root_cause": in_root and not any(r.get("root_cause") for r in records), "offset": m.offset}
            records.append(current)
        if key == "rank" and (r := _RANK_RE.search(value)):
            current["rank"], current["local_rank"] = int(r.group(1)), int(r.group(2))
        elif key == "exitcode" and (e := _EXIT_RE.search(value)):
            current["exitcode"], current["pid"] = int(e.group(1)), int(e.group(2))
            if current["exitcode"] < 0:
                current.setdefault("signal", signal_name(current["exitcode"]))
        elif key == "traceback":
            current["traceback"] = value
            if s := _SIG_RE.search(value):
                current["signal"] = s.group(2)
        else:
            current[key] = value
    return records


def root_failure(records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The root-cause record (else the first failure), or None when there is no table."""
    if not records:
        return None
    return next((r for r in records if r.get("root_cause")), records[0])


def describe(record: dict[str, Any]) -> str:
    """One evidence line for a torchrun record: ``torchrun: rank 3 (local_rank 3) on node02: exitcode -11 ...``."""
    where = f"rank {record.get('rank', '?')} (local_rank {record.get('local_rank', '?')})"
    host = f" on {record['host']}" if record.get("host") else ""
    sig = f" ({record['signal']})" if record.get("signal") else ""
    tb = f": {record['traceback']}" if record.get("traceback") and "enable traceback" not in record["traceback"] \
        else ""
    return f"torchrun: {where}{host} exitcode {record.get('exitcode', '?')}{sig}{tb}"[:400]
