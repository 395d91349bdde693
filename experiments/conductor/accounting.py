"""GPU-hours each run of a Slurm sweep really used, from ``sacct`` (:mod:`launchers.accounting`), for the history
and the report.

Per (variant, repeat): the sum over all its attempts' jobs (a retried run cost every attempt) of elapsed x
allocated GPUs. A job shared by several runs (``pack=true``: one allocation per block) is split evenly between the
runs that name it. Local sweeps have no accounting: nothing is asked and the history keeps the estimate only.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

from contracts.cluster import ClusterConfig
from contracts.manifest import Manifest
from contracts.statuses import FINAL_STATUSES
from launchers.errors import LaunchError


def accounted_gpu_hours(m: Manifest) -> tuple[dict[tuple[str, int], tuple[float | None, str]], str | None]:
    """(variant, repeat) -> (GPU-hours or None, where from / why not), and a warning when sacct could not be asked.

    Never raises for the scheduler's sake: a failed sacct call leaves every run without a figure, with the reason.
    """
    cluster = ClusterConfig.from_json(m.cluster_config)
    if cluster.executor != "slurm":
        return {}, None
    jobs: dict[tuple[str, int], list[str]] = {}
    for v in m.variants:
        for a in v.attempts:
            if a.job_id:
                jobs.setdefault((v.name, a.repeat), []).append(str(a.job_id))
    if not jobs:
        return {}, None
    from launchers.accounting import job_usage
    from launchers.shell import close_shell, shell_for

    shell = None
    try:
        shell = shell_for(cluster)
        usage = job_usage([j for ids in jobs.values() for j in ids], shell)
    except LaunchError as e:
        why = f"sacct could not be asked: {e}"
        return {k: (None, why) for k in jobs}, f"GPU-hours from accounting not recorded: {why}"
    finally:
        close_shell(shell)
    shared = Counter(j for ids in jobs.values() for j in set(ids))
    out: dict[tuple[str, int], tuple[float | None, str]] = {}
    for key, ids in jobs.items():
        known = [j for j in ids if j in usage]
        missing = [j for j in ids if j not in usage]
        if not known:
            out[key] = (None, f"sacct knows none of job(s) {', '.join(ids)}")
            continue
        hours = sum(usage[j].gpu_hours / shared[j] for j in known)
        note = "sacct job(s) " + ", ".join(f"{j} ({usage[j].elapsed_s} s x {usage[j].gpus} GPU"
                                           + (f", shared by {shared[j]} runs" if shared[j] > 1 else "") + ")"
                                           for j in known)
        if missing:
            note += f"; not in sacct: {', '.join(missing)}"
        out[key] = (hours, note)
    return out, None


def record_attempt_gpu_hours(sw: Any) -> None:
    """Write each final Slurm attempt's GPU-hours from ``sacct`` into the manifest (attempt fields
    ``gpu_hours_accounted``, GPU-hours, and ``gpu_hours_note``, where from), for the report's runs
    (``runs[].gpu_hours``, analysis/analyze.py). One sacct call for the attempts that have no figure yet; a job
    shared by the runs of a pack is split evenly between them. Local sweeps, and a sacct that cannot be asked (a
    warning), leave the fields out: the report then shows the estimate only. Never raises for the scheduler."""
    m = sw.m
    cluster = ClusterConfig.from_json(m.cluster_config)
    if cluster.executor != "slurm":
        return
    shared = Counter(str(a.job_id) for v in m.variants for a in v.attempts if a.job_id)
    todo = [(a.ref(v.name), str(a.job_id)) for v in m.variants for a in v.attempts
            if a.job_id and a.status in FINAL_STATUSES and a.get("gpu_hours_accounted") is None]
    if not todo:
        return
    from launchers.accounting import job_usage
    from launchers.shell import close_shell, shell_for

    shell = None
    try:
        shell = shell_for(cluster)
        usage = job_usage(list(dict.fromkeys(j for _, j in todo)), shell)
    except LaunchError as e:
        print(f"warning: GPU-hours from accounting not shown: sacct could not be asked: {e}", file=sys.stderr)
        return
    finally:
        close_shell(shell)
    for ref, job in todo:
        u = usage.get(job)
        if u is None:
            continue  # not (yet) in the accounting database: asked again at the next collect
        note = f"sacct job {job}: {u.elapsed_s} s x {u.gpus} GPU" + (
            f", shared by {shared[job]} runs" if shared[job] > 1 else "")
        sw.writer.set(ref, gpu_hours_accounted=round(u.gpu_hours / shared[job], 6), gpu_hours_note=note)
    sw.writer.commit()
