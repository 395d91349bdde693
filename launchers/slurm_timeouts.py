"""The cluster's own Slurm timeouts that date a late scheduler stop, read once per collect pass.

The failure judgement (analysis.judge.timeline) decides whether a ``CANCELLED ... DUE TO NODE_FAILURE / PREEMPTION /
TIME LIMIT`` line that comes minutes after the first symptom explains it. How late it may come is the cluster's
configuration, not a constant:

- ``KillWait`` (slurm.conf(5)): seconds between the SIGTERM and the SIGKILL of a job at its time limit or cancel
  (default 30 s); ``scontrol show config`` prints it as ``KillWait                = 30 sec``.
- ``SlurmdTimeout`` (slurm.conf(5)): seconds slurmctld waits for slurmd before it sets a node DOWN and fails its jobs
  (default 300 s); printed as ``SlurmdTimeout           = 300 sec``.
- ``GraceTime``: seconds a preempted job is given after its SIGTERM before it is killed; a partition's
  (``scontrol show partition <p>``: ``GraceTime=<seconds>``, slurm.conf(5) default 0) or a QOS's
  (``sacctmgr -n -P show qos <q> format=name,gracetime``: ``[D-]HH:MM:SS``, sacctmgr(1)). Which of them applies
  depends on PreemptType; the larger is kept (the wider window explains no fewer real preemptions).

Nothing here raises for the scheduler: a missing ``scontrol`` or an unreadable answer leaves that value None, and the
judgement then uses the slurm.conf(5) default and says so.
"""

from __future__ import annotations

import re
from typing import Any

from contracts.slurm import TIMEOUT_KEYS as KEYS
from launchers.errors import LaunchError
from launchers.shell import Shell

_CONFIG = {"KillWait": "kill_wait_s", "SlurmdTimeout": "slurmd_timeout_s"}
_CONFIG_LINE = re.compile(r"^\s*(KillWait|SlurmdTimeout)\s*=\s*(\d+)\s*(?:sec)?\s*$", re.M)
_GRACE = re.compile(r"(?:^|\s)GraceTime=(\d+)(?:\s|$)")
_HMS = re.compile(r"^(?:(\d+)-)?(\d+):(\d\d):(\d\d)$")


def parse_config(text: str) -> dict[str, float]:
    """``kill_wait_s`` and ``slurmd_timeout_s`` (s) from ``scontrol show config`` output; absent keys are left out."""
    return {_CONFIG[m.group(1)]: float(m.group(2)) for m in _CONFIG_LINE.finditer(text)}


def parse_partition_grace(text: str) -> float | None:
    """A partition's ``GraceTime`` (s) from ``scontrol show partition <p>`` output, or None."""
    m = _GRACE.search(text)
    return float(m.group(1)) if m else None


def parse_qos_grace(text: str, qos: str) -> float | None:
    """QOS ``qos``'s GraceTime (s) from ``sacctmgr -n -P show qos format=name,gracetime`` output (``name|[D-]HH:MM:SS``
    lines), or None when the QOS is not listed or its time is unreadable."""
    for line in text.splitlines():
        name, _, when = line.strip().partition("|")
        if name != qos:
            continue
        m = _HMS.match(when.strip())
        if m is None:
            return None
        d, h, mi, s = (int(x) if x else 0 for x in m.groups())
        return float(((d * 24 + h) * 60 + mi) * 60 + s)
    return None


def read_timeouts(shell: Shell, partition: str | None = None, qos: str | None = None) -> dict[str, Any]:
    """The cluster's ``kill_wait_s``, ``slurmd_timeout_s`` and ``grace_time_s`` (s, None when unknown), and ``note``:
    which could not be read and why. At most three calls: ``scontrol show config``, ``scontrol show partition <p>``
    (the default partition when ``partition`` is None) and, with a ``qos``, ``sacctmgr show qos``. Never raises."""
    out: dict[str, Any] = dict.fromkeys(KEYS)
    missing: list[str] = []

    def ask(argv: list[str]) -> str | None:
        try:
            res = shell(argv, timeout_s=30)
        except LaunchError as e:
            missing.append(f"{argv[0]} {argv[1]}: {e}")
            return None
        if res.rc != 0:
            missing.append(f"{' '.join(argv[:3])}: exit {res.rc} {res.err.strip()}")
            return None
        return res.out

    text = ask(["scontrol", "show", "config"])
    if text is not None:
        out.update(parse_config(text))
    if text is not None or not missing:
        graces = []
        part = ask(["scontrol", "show", "partition"] + ([partition] if partition else []))
        if part is not None:
            if not partition:  # every partition is listed: the default one (``Default=YES``) is the one used
                part = next((b for b in part.split("\n\n") if "Default=YES" in b), part)
            graces.append(parse_partition_grace(part))
        if qos:
            q = ask(["sacctmgr", "-n", "-P", "show", "qos", "format=name,gracetime"])
            if q is not None:
                graces.append(parse_qos_grace(q, qos))
        known = [g for g in graces if g is not None]
        out["grace_time_s"] = max(known) if known else None
    unread = [k for k in KEYS if out[k] is None]
    out["note"] = ("read from the cluster" if not unread else
                   f"not read: {', '.join(unread)}" + (f" ({'; '.join(missing)})" if missing else ""))
    return out
