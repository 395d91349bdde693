"""Read a cluster profile (conf/cluster/*.yaml) whatever its carrier.

The planner passes a frozen ``experiments.config.ClusterConfig``; tests and scripts may pass a plain mapping
with the same field names (CONTRACTS §9). Only the launch layer's view of it lives here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from launchers.errors import LaunchConfigError


def get(obj: Any, name: str, default: Any = None) -> Any:
    """``obj.name`` or ``obj[name]``; ``default`` when absent or ``None``."""
    if isinstance(obj, Mapping):
        value = obj.get(name, default)
    else:
        value = getattr(obj, name, default)
    return default if value is None else value


def tunnel_field(cluster: Any, name: str, default: Any = None) -> Any:
    """A field of ``cluster.tunnel`` (``kind``, ``host``, ``user``, ``identity``, ``job_dir``)."""
    return get(get(cluster, "tunnel", {}), name, default)


_TIME = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$")


def time_limit_s(cluster: Any) -> int:
    """``cluster.time_limit`` in seconds. Slurm's formats ``MM:SS``, ``HH:MM:SS`` and ``D-HH:MM:SS``.

    Raises:
        LaunchConfigError: the value is not in one of those formats or is zero.
    """
    text = str(get(cluster, "time_limit", "00:30:00"))
    m = _TIME.match(text)
    if not m:
        raise LaunchConfigError(
            f"cluster.time_limit={text!r} is not a Slurm time limit; use HH:MM:SS or D-HH:MM:SS (e.g. 00:45:00)"
        )
    days, hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
    total = days * 86400 + hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise LaunchConfigError(f"cluster.time_limit={text!r} must be longer than zero")
    return total


def slurm_time(seconds: int) -> str:
    """Seconds as Slurm's ``D-HH:MM:SS`` / ``HH:MM:SS`` (sbatch ``--time``)."""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    hms = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{hms}" if days else hms
