"""A detached Slurm sweep's collect, queued as a Slurm job behind the sweep's run jobs (:mod:`launchers.collect_job`).

When the conductor detaches, every job in flight is known: the collect job waits for all of them
(``--dependency=afterany``), so the sweep is collected, analysed and its history recorded when its last job ends,
from this checkout. ``collect_job=false`` leaves it to a later ``action=collect`` (a cron line). Where the job is
recorded: ``<sweep>/collect_job.json`` (its Slurm job id, the run jobs it waits for, its log folder).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from contracts.atomic import write_json
from contracts.manifest import Manifest
from contracts.secrets import url_credentials
from experiments.conductor.tracking import Sweep

RECORD = "collect_job.json"  # SweepDir.collect_job


def run_job_ids(m: Manifest) -> list[str]:
    """The Slurm job ids of the sweep's attempts still in flight (submitted or running), each once, in manifest
    order; a packed block's runs share one id."""
    live = {(r.variant, r.repeat, r.attempt) for r in m.live_refs()}
    ids = [str(a.job_id) for v in m.variants for a in v.attempts
           if a.job_id and (v.name, a.repeat, a.attempt) in live]
    return list(dict.fromkeys(ids))


# the history outlets whose URL may carry a password, and the variable the collect's client reads it from instead:
# libpq's PGPASSWORD (analysis.history.password_from_env), MLflow's own (analysis/history/mlflow_export.py)
PASSWORD_VARIABLES = (("url", "PGPASSWORD"), ("mlflow", "MLFLOW_TRACKING_PASSWORD"))


NOTIFY_VARIABLE = "MOE_SWEEP_NOTIFY_SECRET"  # a secret's name (CONTRACTS §10): the job gets a direct webhook URL here


def collect_handover(history: Mapping[str, Any] | None) -> tuple[dict[str, str], tuple[str, ...]]:
    """What the chained collect needs of this command's history settings that the sweep does not store: the
    passwords (:func:`collect_secrets`) and a webhook given as a URL (``history.notify=https://...``, stored masked:
    a webhook URL is a secret), which the job gets as :data:`NOTIFY_VARIABLE` in its environment with
    ``history.notify=env:MOE_SWEEP_NOTIFY_SECRET`` on its command. Returns (secrets, overrides)."""
    secrets = collect_secrets(history)
    notify = (history or {}).get("notify")
    if isinstance(notify, str) and notify and not notify.startswith("env:") and "***" not in notify:
        secrets[NOTIFY_VARIABLE] = notify
        return secrets, (f"history.notify=env:{NOTIFY_VARIABLE}",)
    return secrets, ()


def collect_secrets(history: Mapping[str, Any] | None) -> dict[str, str]:
    """The passwords the chained collect's history step needs and the sweep does not store (CONTRACTS §10): for each
    of ``history.url`` and ``history.mlflow`` given on this command with a password (``user:pass@host``), that
    password under the variable its client reads (``PGPASSWORD``, ``MLFLOW_TRACKING_PASSWORD``). The job gets them
    the way it gets every secret, through sbatch's export of the submitting environment, never in a file. A URL
    whose password the manifest holds as ``***`` adds nothing: what this shell exports reaches the job as it is."""
    out: dict[str, str] = {}
    for key, variable in PASSWORD_VARIABLES:
        _, password = url_credentials((history or {}).get(key))
        if password and password != "***":
            out[variable] = password
    return out


def chain_collect(sw: Sweep, history: Mapping[str, Any] | None = None) -> str | None:
    """Queue the collect job of the detached sweep ``sw`` behind its jobs in flight; returns its Slurm job id, or
    None when none was queued (``collect_job=false``, a backend that cannot, no job in flight, or sbatch refused:
    then a warning names the command that collects by hand). ``history``: this command's own history settings (URLs
    with their passwords, a webhook URL), which the job gets (:func:`collect_handover`). Never raises for the scheduler:
    the runs are queued whatever happens to their collect."""
    from launchers.errors import LaunchError

    m = sw.m
    how = f"python -m experiments.sweep action=collect sweep_id={m.sweep_id} output_dir={sw.sd.root}"
    if not bool(getattr(sw.settings, "collect_job", True)):
        return None
    after = run_job_ids(m)
    if not sw.backend.chains_collect or not after:
        return None
    try:
        secrets, overrides = collect_handover(history)
        handle = sw.backend.submit_collect(m.sweep_id, after, secrets=secrets, overrides=overrides)
    except LaunchError as e:  # SchedulerError and LaunchConfigError: the runs stay queued
        print(f"warning: the collect job was not queued ({e}); collect with: {how}", file=sys.stderr)
        return None
    try:
        write_json(sw.sd.collect_job, {"job_id": handle.job_id, "after": after, "dependency": "afterany",
                                        "job_dir": handle.job_dir})
    except OSError as e:
        print(f"warning: {RECORD} not written ({e}); the collect job {handle.job_id} is queued", file=sys.stderr)
    print(f"collect chained: Slurm job {handle.job_id} collects the sweep when its last job ends "
          f"(--dependency=afterany:{':'.join(after)}); its log: {handle.job_dir}")
    return handle.job_id
