"""Read a cluster profile (conf/cluster/*.yaml) whatever its carrier.

The planner passes a frozen ``contracts.cluster.ClusterConfig``; tests and scripts may pass a plain mapping
with the same field names (CONTRACTS §9). Only the launch layer's view of it lives here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts.errors import ConfigError
from contracts.slurm import format_time_limit, parse_time_limit
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


def time_limit_s(cluster: Any) -> int:
    """``cluster.time_limit`` in seconds, as Slurm means it (:func:`contracts.slurm.parse_time_limit`: ``30`` is
    30 minutes, ``1-12`` is 36 hours).

    Raises:
        LaunchConfigError: a malformed value (the message names Slurm's forms).
    """
    try:
        return parse_time_limit(get(cluster, "time_limit", "00:30:00"))
    except ConfigError as e:
        raise LaunchConfigError(str(e)) from None


slurm_time = format_time_limit
