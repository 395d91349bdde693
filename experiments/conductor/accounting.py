"""GPU-hours each run of a Slurm sweep really used, from ``sacct`` (:mod:`launchers.accounting`, asked once per
attempt by :func:`record_attempt_gpu_hours`), for the report and, summed per run, the history.

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
from contracts.slurm import TIMEOUT_KEYS as KEYS
from contracts.statuses import FINAL_STATUSES
from launchers.errors import LaunchError


def accounted_gpu_hours(m: Manifest) -> dict[tuple[str, int], tuple[float | None, str]]:
    """(variant, repeat) -> (GPU-hours or None, where from / why not), for the history: the sum of what each
    attempt of the run already recorded (``gpu_hours_accounted``, written by :func:`record_attempt_gpu_hours`, the
    one ``sacct`` pass; a packed job already split between its runs). Asks nothing of the scheduler. Local sweeps
    give an empty map (the history keeps the estimate only)."""
    if ClusterConfig.from_json(m.cluster_config).executor != "slurm":
        return {}
    attempts: dict[tuple[str, int], list[Any]] = {}
    for v in m.variants:
        for a in v.attempts:
            if a.job_id:
                attempts.setdefault((v.name, a.repeat), []).append(a)
    out: dict[tuple[str, int], tuple[float | None, str]] = {}
    for key, atts in attempts.items():
        known = [a for a in atts if a.get("gpu_hours_accounted") is not None]
        missing = [str(a.job_id) for a in atts if a.get("gpu_hours_accounted") is None]
        if not known:
            out[key] = (None, f"sacct had no record of job(s) {', '.join(missing)} when the sweep was collected")
            continue
        note = "; ".join(str(a.get("gpu_hours_note") or f"job {a.job_id}") for a in known)
        if missing:
            note += f"; not in sacct: {', '.join(missing)}"
        out[key] = (round(sum(float(a.get("gpu_hours_accounted")) for a in known), 6), note)
    return out


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


def record_slurm_timeouts(sw: Any) -> None:
    """Write the cluster's Slurm timeouts into each final Slurm attempt (attempt field ``slurm_timeouts``:
    ``kill_wait_s``, ``slurmd_timeout_s``, ``grace_time_s`` in s or None, and ``note``), for the failure judgement's
    late-stop windows (analysis.judge.timeline). Asked once per sweep (:func:`launchers.slurm_timeouts.read_timeouts`,
    for the sweep's partition and QOS): an answer already recorded on an attempt is copied to the others; a partial
    one is asked again at the next collect. Local sweeps record nothing. Never raises for the scheduler."""
    m = sw.m
    cluster = ClusterConfig.from_json(m.cluster_config)
    if cluster.executor != "slurm":
        return
    attempts = [(a.ref(v.name), a) for v in m.variants for a in v.attempts if a.job_id and a.status in FINAL_STATUSES]
    known = next((t for _, a in attempts if isinstance(t := a.get("slurm_timeouts"), dict)
                  and all(t.get(k) is not None for k in KEYS)), None)
    todo = [ref for ref, a in attempts if known is None or a.get("slurm_timeouts") != known]
    if not todo:
        return
    if known is None:
        from launchers.shell import close_shell, shell_for
        from launchers.slurm_timeouts import read_timeouts

        shell = None
        try:
            shell = shell_for(cluster)
            known = read_timeouts(shell, cluster.partition, cluster.qos)
        except LaunchError as e:
            known = {**dict.fromkeys(KEYS), "note": f"not read: the cluster could not be reached ({e})"}
        finally:
            close_shell(shell)
    for ref in todo:
        sw.writer.set(ref, slurm_timeouts=known)
    sw.writer.commit()
