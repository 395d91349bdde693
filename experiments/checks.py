"""Plan-time checks of every value that a later stage reads (docs/CONTRACTS.md §1, §5): a bad value fails here with
exit code 2 and a message naming it, before anything is written or submitted, never later at submit or collect.

The planner (:func:`experiments.plan.make_plan`) calls :func:`check_all`; ``action=collect`` and a resume call
:func:`check_history` and :func:`check_usage` for the keys given on their own command line.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from contracts.errors import ConfigError

PAYLOAD_KEYS = ("train_iters", "max_iters", "stop_precision", "seed", "hold_s", "hold_at")


def _number(key: str, value: Any, *, low: float = 0.0, strict: bool = True) -> None:
    ok = not isinstance(value, bool) and isinstance(value, int | float)
    if not ok or (value <= low if strict else value < low):
        bound = f"> {low:g}" if strict else f">= {low:g}"
        raise ConfigError(f"{key}={value!r} must be a number {bound}")


def check_usage(settings: Any) -> None:
    """Combinations of keys that mean nothing: ``dry_run=true`` with an action other than plan/run, and
    ``sweep_id=latest`` where a new folder would be made (it names an existing sweep, never a folder).

    Raises:
        ConfigError: names the keys and what to write instead.
    """
    if settings.dry_run and settings.action not in ("run", "plan"):
        raise ConfigError(f"dry_run=true is an alias for action=plan; it cannot be combined with "
                          f"action={settings.action}. Drop dry_run=true")
    if settings.sweep_id == "latest" and settings.effective_action == "plan":
        raise ConfigError("sweep_id=latest names an existing sweep (for action=status|collect|cancel, or run to "
                          "resume it); a plan makes a new sweep: drop sweep_id, or give a new id")


def check_settings(settings: Any) -> None:
    """The numbers of the top level: ``hang_min_s`` (s), ``poll_s`` (s) and ``max_gpu_hours`` (GPU-hours) > 0."""
    _number("hang_min_s", settings.hang_min_s)
    _number("poll_s", settings.poll_s)
    _number("max_gpu_hours", settings.max_gpu_hours)


def check_payload(cfg: dict[str, Any]) -> None:
    """``payload.*``: ``train_iters`` null, ``auto`` or an integer >= 1, ``max_iters`` (the cap of ``auto``) null or
    an integer >= 10, ``stop_precision`` (the relative half-width at which ``auto`` stops) in (0, 1), ``seed`` an
    integer, ``hold_s`` s >= 0, ``hold_at`` end|start."""
    p = dict(cfg.get("payload") or {})
    unknown = sorted(set(p) - set(PAYLOAD_KEYS))
    if unknown:
        raise ConfigError(f"unknown key payload.{unknown[0]}; valid keys of payload: {', '.join(PAYLOAD_KEYS)}")
    it = p.get("train_iters")
    if it is not None and it != "auto" and (isinstance(it, bool) or not isinstance(it, int) or it < 1):
        raise ConfigError(f"payload.train_iters={it!r} must be an integer >= 1, auto or null")
    cap = p.get("max_iters")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 10):
        raise ConfigError(f"payload.max_iters={cap!r} must be an integer >= 10 or null (the cap of train_iters=auto)")
    prec = p.get("stop_precision")
    if prec is not None and (isinstance(prec, bool) or not isinstance(prec, int | float) or not 0 < prec < 1):
        raise ConfigError(f"payload.stop_precision={prec!r} must be a fraction in (0, 1), e.g. 0.005 for +-0.5%")
    seed = p.get("seed", 1234)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"payload.seed={seed!r} must be an integer")
    _number("payload.hold_s", p.get("hold_s", 0), strict=False)
    if p.get("hold_at", "end") not in ("end", "start"):
        raise ConfigError(f"payload.hold_at={p.get('hold_at')!r} is not valid; valid values: end, start")


def check_history(hist: dict[str, Any]) -> None:
    """``history.*`` (enabled, url, window, threshold, alpha, noise_k, min_nights), without connecting to the
    database: the URL must parse and name an installed SQLite or PostgreSQL driver.

    Raises:
        ConfigError: the history stage's own message (``analysis.history.check_settings``).
    """
    from analysis.history import HistoryInputError, check_settings

    try:
        check_settings(hist)
    except HistoryInputError as e:
        raise ConfigError(str(e)) from None


def check_writable(out: Path) -> None:
    """``output_dir`` (or the folder it will be made in) must be writable by this user.

    Raises:
        ConfigError: names the folder and why (read-only file system, permissions).
    """
    probe = Path(out).absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"output_dir={out}: {probe} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"output_dir={out}: {probe} is not writable (read-only file system or permissions); "
                          "choose another output_dir or results_root")


def check_sweep_writable(folder: Path, action: str) -> None:
    """An action that records into an existing sweep (``run`` to resume, ``collect``, ``cancel``) needs its folder
    writable; ``status`` only reads.

    Raises:
        ConfigError: names the action, the folder and why, before anything is touched.
    """
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"action={action}: the sweep folder {folder} is not writable (read-only file system or "
                          f"permissions), and {action} records into it (its lease, the manifest, the report). Run it "
                          "where the folder can be written; action=status only reads")


def check_git(settings: Any, executor: str, changed: Sequence[str] | None) -> str | None:
    """A dirty git tree (``changed``: the tracked files with uncommitted changes, :func:`experiments.plan.git_state`)
    is refused before a Slurm sweep is written, unless ``allow_dirty=true`` (the jobs ship a git archive of the
    commit). For ``action=plan`` it is a warning. Either names up to 5 of the files, then how many more.

    Returns the warning text, or None. Raises ConfigError for a run that would be refused at submit time.
    """
    if executor != "slurm" or not changed or settings.allow_dirty:
        return None
    from launchers.packaging import name_changed

    text = (f"the git tree has uncommitted changes to tracked files ({name_changed(changed)}); the jobs ship a git "
            "archive of the commit. Commit them (or restore them: git checkout -- <file>), or pass allow_dirty=true "
            "to ship the working tree as it is")
    if settings.effective_action == "plan":
        return f"submitting this plan will be refused: {text}"
    raise ConfigError(text)


def check_all(settings: Any, cfg: dict[str, Any]) -> None:
    """Every check above that needs only the composed config, the typed cluster profile (ClusterConfig) first.

    Raises:
        ConfigError: the first bad value, named with the valid ones.
    """
    if not isinstance(cfg.get("profile", False), bool):
        raise ConfigError(f"profile={cfg.get('profile')!r} must be true or false")
    check_usage(settings)
    check_settings(settings)
    check_payload(cfg)
    check_history(dict(cfg.get("history") or {}))
    from experiments.conductor.fabric import FabricSettings
    from experiments.config import cluster_from_cfg

    cluster = cluster_from_cfg(cfg)  # typed first: the checks below read its fields
    FabricSettings.from_config(cfg, {"nodes": cluster.nodes, "executor": cluster.executor})  # fabric_probe, fabric.*


# analysis/measure/stats.py: MIN_STEADY steady iterations at least, after max(3, ceil(10%)) of warm-up by default
MIN_STEADY = 5


def check_warmup(cfg: dict[str, Any], mode: str) -> None:
    """In train mode, the warm-up the analysis skips (``analysis.warmup_iters``, or its default max(3, ceil(10%
    of payload.train_iters))) must leave at least 5 steady iterations of ``payload.train_iters`` (30 by default):
    otherwise every run ends ``insufficient_iterations`` after its GPU time is spent.

    Raises:
        ConfigError: names both values and the largest warm-up the run allows.
    """
    if mode != "train":
        return
    payload = cfg.get("payload") or {}
    iters = payload.get("train_iters") or 30
    if iters == "auto":  # the rule stops a run after >= 8 steady steps; its cap must allow them
        iters = payload.get("max_iters") or 60
    given = (cfg.get("analysis") or {}).get("warmup_iters")
    warm = given if given is not None else max(3, math.ceil(0.1 * iters))
    if iters - warm < MIN_STEADY:
        what = f"analysis.warmup_iters={given}" if given is not None else f"the default warm-up of {warm} iterations"
        raise ConfigError(f"{what} leaves {max(0, iters - warm)} steady iteration(s) of payload.train_iters={iters}; "
                          f"the analysis needs at least {MIN_STEADY}. Raise payload.train_iters to "
                          f"{warm + MIN_STEADY} or more, or set analysis.warmup_iters <= {max(0, iters - MIN_STEADY)}")


def check_train_gpus(mode: str, executor: str, local_gpus: int) -> None:
    """``mode=train`` on ``cluster=local`` needs a GPU visible here (the payload would fail at its first CUDA call).

    Raises:
        ConfigError: says so and what to write instead (mode=validate, or a Slurm cluster).
    """
    if mode == "train" and executor == "local" and local_gpus == 0:
        raise ConfigError("mode=train on cluster=local needs a GPU, and none is visible here (nvidia-smi lists none "
                          "within CUDA_VISIBLE_DEVICES). Use mode=validate (the library checks without a GPU), or a "
                          "GPU cluster such as cluster=h100_slurm")


def check_unattended_history(cfg: dict[str, Any], *, detached: bool, chained: bool,
                             environ: dict[str, str] | None = None) -> list[str]:
    """Plan-time warnings for a history that another process will write (a detached sweep's chained collect job or
    a later ``action=collect``), which sees neither this command line's secrets nor, unless it exports them, this
    shell's: ``history.url`` naming a PostgreSQL user without a password while no password source is set here
    (``PGPASSWORD``, ``PGPASSFILE``, ``~/.pgpass``); and, without the chained collect, a password or a webhook URL
    that the sweep stores masked, which the later collect must be given again. Returns the warning texts (none
    for a foreground sweep: this process records the night itself)."""
    hist = cfg.get("history") or {}
    if not detached or not hist.get("enabled"):
        return []
    env = os.environ if environ is None else environ
    out = []
    url = str(hist.get("url") or "")
    if url.startswith("postgresql"):
        from contracts.secrets import url_credentials

        user, password = url_credentials(url)
        passfile = Path(env.get("PGPASSFILE") or Path(env.get("HOME", "~")).expanduser() / ".pgpass")
        if user and not password and not env.get("PGPASSWORD") and not passfile.is_file():
            out.append(f"history.url names the PostgreSQL user {user!r} without a password, and neither PGPASSWORD "
                       f"nor a password file ({passfile}) is set here: if the server asks for one, the collect "
                       "cannot record the night (it then alerts through history.notify). Export PGPASSWORD in the "
                       "shell (or cron line) that submits, or write ~/.pgpass")
        if password and not chained:
            out.append("history.url carries a password, which the sweep does not store: the later action=collect "
                       "needs PGPASSWORD (or ~/.pgpass) in its shell, or the URL with its password again")
    notify = str(hist.get("notify") or "")
    if notify and not notify.startswith("env:") and not chained:
        out.append("history.notify is a webhook URL, which the sweep stores masked (it is a secret): the later "
                   "action=collect can alert only with history.notify given again on its own command line. Use "
                   "history.notify=env:VARIABLE with the variable exported where the collect runs")
    return out


def check_remote_bare_metal(cluster: Any) -> str | None:
    """A profile reached over SSH without a container image runs the payload with the ``python`` the cluster's
    job shell finds first on its PATH (launchers/slurm.py ``default_python``), which this machine cannot check: a
    plan-time warning saying what it needs, or None."""
    if not cluster.remote or cluster.container_image:
        return None
    return ("cluster.container_image is null and the cluster is reached over SSH: the jobs run the payload with the "
            "`python` first on the job's PATH there, which needs torch and megatron-core (and Megatron-Bridge to "
            "train); without them every run fails with payload_error core_missing. Set cluster.container_image, or "
            "install that stack into the python the cluster's job shell finds first")


def check_secret_env(cluster: Any, environ: dict[str, str] | None = None) -> str | None:
    """The ``cluster.secret_env`` names set neither in this environment nor in ``cluster.env_vars``: their jobs
    would run without them (sbatch exports only what the submitting shell has, launchers/envvars.py). A plan-time
    warning that names them, or None when every name is set."""
    env = os.environ if environ is None else environ
    unset = [n for n in cluster.secret_env if n not in env and n not in (cluster.env_vars or {})]
    if not unset:
        return None
    return (f"cluster.secret_env names {', '.join(unset)}, not set in this environment: the jobs will run without "
            f"{'it' if len(unset) == 1 else 'them'}. Export {'it' if len(unset) == 1 else 'them'} in the shell that "
            "submits (a resume takes them from its own shell), or drop the name from cluster.secret_env")


def check_secret_values(cluster: Any, environ: dict[str, str] | None = None) -> None:
    """Every secret value a job gets (``cluster.env_vars`` under a secret name, and the ``cluster.secret_env``
    names set in this environment) must be one that masking can replace safely: at least 8 characters and not a
    number (``contracts.secrets.maskable``); a value such as ``32`` would hide step times in the collected logs.

    Raises:
        ConfigError: names the variables (never their values).
    """
    from contracts.secrets import MIN_SECRET_LEN, is_secret, weak_secrets

    env = os.environ if environ is None else environ
    values = {k: v for k, v in (cluster.env_vars or {}).items() if is_secret(k, cluster.secret_env)}
    values.update({k: env[k] for k in cluster.secret_env if k not in values and k in env})
    weak = weak_secrets(values)
    if weak:
        raise ConfigError(f"secret(s) {', '.join(weak)} have a value shorter than {MIN_SECRET_LEN} characters or made "
                          "of digits only: masking it in the collected logs would also hide ordinary numbers. Use a "
                          "real credential, or drop the name from cluster.secret_env if it is not a secret")
