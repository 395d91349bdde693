"""The launcher for a sweep's cluster profile, built from the typed manifest (docs/CONTRACTS.md §9, §10)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from contracts.cluster import ClusterConfig
from contracts.errors import ConfigError
from contracts.jobs import JobHandle
from contracts.manifest import Manifest
from contracts.secrets import MASK
from contracts.statuses import Mode
from contracts.sweepdir import SweepDir
from launchers.backend import Backend, LocalBackend
from launchers.slurm_backend import SlurmBackend

REPO = Path(__file__).resolve().parents[2]


def job_cluster(cluster: dict[str, Any], strict: bool = True) -> dict[str, Any]:
    """The cluster config jobs get: secret env values masked as ``***`` in the manifest come from this process'
    environment (CONTRACTS §10: they are never written down, so a resume needs them exported).

    Raises:
        ConfigError: a masked secret is not in the environment (names it and how to fix it).
    """
    env = dict(cluster.get("env_vars") or {})
    for k, v in env.items():
        if v == MASK:
            if k not in os.environ:
                if not strict:
                    continue
                raise ConfigError(f"cluster.env_vars.{k} is a secret: the sweep recorded it as *** and it is not in "
                                  f"this shell's environment. Export {k} and run the command again")
            env[k] = os.environ[k]
    return {**cluster, "env_vars": env}


def _local_gpus(sd: SweepDir, m: Manifest) -> int:
    """GPUs per run on the local executor: what the plan resolved into variant.json (0 in validate mode)."""
    if m.mode != Mode.TRAIN:
        return 0
    for v in m.variants:
        try:
            return int(json.loads(sd.variant_json(v.name).read_text())["cluster"]["gpus_per_node"] or 0)
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return 0


def handles(m: Manifest) -> list[JobHandle]:
    """The job handles recorded in the manifest's attempts (what a launcher needs to find the jobs again)."""
    out = []
    for v in m.variants:
        for a in v.attempts:
            if a.job_id:
                out.append(JobHandle(a.ref(v.name).task, str(a.job_id), job_dir=a.get("job_dir"),
                                     pack_step=a.get("pack_step"), host_dir=a.get("host_dir") or "",
                                     pid=_int(a.get("pid")), pid_start=_int(a.get("pid_start"))))
    return out


def _int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def make_backend(sd: SweepDir, m: Manifest, cluster: dict[str, Any] | None = None, strict: bool = True) -> Backend:
    """The backend for the sweep's cluster profile (local or Slurm), told of every job the manifest records.

    ``cluster``: the unmasked cluster config of this process' plan; without it (resume, collect, cancel) the
    manifest's is used and every secret it records as ``***`` is taken from this shell's environment.

    Raises:
        ConfigError: a masked secret is missing from the environment, or the recorded profile is malformed.
    """
    profile = ClusterConfig.from_json(job_cluster(cluster or m.cluster_config, strict))
    hold = float((m.config.get("payload") or {}).get("hold_s") or 0)
    backend: Backend
    if profile.is_local:
        backend = LocalBackend(sd.root, profile, _local_gpus(sd, m), m.name, hold)
        if m.mode == "validate" and not hold:
            # no GPU is used: the runs of a launch share one validate process (torch and Megatron-Core, about 4 s
            # of imports, once per sweep instead of once per run)
            backend.batch_validate, backend.max_concurrent = True, None
    else:
        backend = SlurmBackend(sd.root, profile, title=m.name, repo=REPO, allow_dirty=bool(m.allow_dirty),
                               pack=bool(m.config.get("pack")), hold_s=hold)
    backend.adopt(handles(m))
    return backend
