"""Submit runs to Slurm through NeMo-Run, detached: one ``run.Experiment`` per batch, one Slurm job per run.

The jobs are independent (no ``afterok`` chains: one failed run would leave every later one pending forever;
FACTS §5). If sbatch refuses any job of a batch, the jobs of that batch already queued are cancelled again and a
:class:`SchedulerError` carries Slurm's own message: nothing is left half-submitted (CONTRACTS §5, exit code 5).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contracts.cluster import ClusterConfig
from launchers.batch import Batch, BatchRequest, Item, Task, slurm_batch
from launchers.envvars import JobEnv, mask_text, quoted_env
from launchers.errors import LaunchConfigError, LaunchError, SchedulerError
from launchers.home import nemo_run, nemorun_home, no_stdin
from launchers.pack import PackedRun, pack_batch
from launchers.packaging import check_clean, code_packager, git_state, ship_ref
from launchers.procenv import environ, in_dir
from launchers.procs import SUBMITTER_ENV, submitter_marker
from launchers.shell import Shell, close_shell, close_tunnel, local_shell, shell_for

_HANDLE_JOB = re.compile(r"/(\d+(?:_\d+)?)(?:/|$)")


@dataclass(frozen=True)
class Submission:
    """One queued job: Slurm ``job_id`` of task ``name`` in NeMo-Run experiment ``exp_id``.

    ``job_dir``: the task folder on this machine (logs land there on a login node); ``host_dir``: the same
    folder on the cluster (where the logs are over SSH: :func:`launchers.track.fetch_log_files`);
    ``script``: the sbatch text exactly as submitted, secrets masked (for ``variants/<v>/job.sh``);
    ``submitted``: ISO-8601 UTC time of the submission; ``item``: the RunSpec or JobCommand.
    """

    name: str
    job_id: str
    exp_id: str
    job_dir: Path
    script: str
    submitted: str
    item: Item
    host_dir: str = ""


def utc_now() -> str:
    """The current time as ISO-8601 UTC with seconds (``2026-11-29T16:00:00Z``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def job_id_of(handle: str) -> str:
    """The Slurm job id in a NeMo-Run/torchx app handle (``slurm_tunnel://nemo_run/1234`` -> ``1234``).

    Raises:
        SchedulerError: no job id in the handle.
    """
    m = _HANDLE_JOB.search(handle.split("://", 1)[-1])
    if not m:
        raise SchedulerError(f"NeMo-Run returned the job handle {handle!r} with no Slurm job id in it")
    return m.group(1)


def _secrets_for_transport(cluster: ClusterConfig, env: JobEnv, allow_ssh_secrets: bool) -> dict[str, str]:
    """Secrets that must be written into the script (SSH with opt-in only); refuses SSH without the opt-in.

    Raises:
        LaunchConfigError: secrets would have to be written down for an SSH tunnel and the user did not opt in.
    """
    if not cluster.remote or not env.secret_names:
        return {}
    if not allow_ssh_secrets:
        raise LaunchConfigError(
            f"secrets {', '.join(env.secret_names)} cannot reach jobs over an SSH tunnel without being written into "
            "the job script on the cluster (CONTRACTS §10). Unset them here and set them on the cluster side "
            "(e.g. in ~/.bashrc there), or opt in with allow_ssh_secrets=true"
        )
    values = dict(env.secrets)
    values.update({n: os.environ[n] for n in env.passthrough if n in os.environ})
    return values


def _scheduler_message(exc: BaseException) -> str:
    """sbatch's own words from an invoke/Fabric failure (its stderr), else the exception text."""
    result = getattr(exc, "result", None)
    err = (getattr(result, "stderr", "") or "").strip() if result is not None else ""
    return err or str(exc).strip() or type(exc).__name__


def cancel(job_ids: Sequence[str], shell: Shell = local_shell) -> None:
    """``scancel`` the given Slurm jobs (already finished ones are ignored by Slurm).

    Raises:
        SchedulerError: scancel failed for another reason than an unknown or finished job.
    """
    if not job_ids:
        return
    res = shell(["scancel", *job_ids])
    if res.rc != 0 and "Invalid job id" not in res.err and "already completing" not in res.err:
        raise SchedulerError(f"scancel {' '.join(job_ids)} failed: {res.err.strip() or res.out.strip()}")


def no_requeue(job_ids: Sequence[str], shell: Shell = local_shell) -> bool:
    """Clear the requeue flag of queued jobs (``scontrol update JobId=<ids> Requeue=0``); True when Slurm took it.

    NeMo-Run 0.11.1 submits every job with ``sbatch --requeue`` (``torchx_backend/schedulers/slurm.py``), so a job
    whose node fails (``NODE_FAIL``) would be put back in the queue by Slurm and run again under the same attempt,
    its first try's log appended to. A run's retry is the tool's: an attempt that lost a node ends as
    ``node_failure`` with the node named, and ``action=run`` resubmits it as attempt k+1. A refusal (an old Slurm)
    leaves the flag as it was and is not an error.
    """
    if not job_ids:
        return True
    res = shell(["scontrol", "update", f"JobId={','.join(job_ids)}", "Requeue=0"])
    return res.rc == 0


def submit_slurm(request: BatchRequest, *, state_dir: str | Path, repo: str | Path, allow_dirty: bool = False,
                 allow_ssh_secrets: bool = False, shell: Shell | None = None) -> list[Submission]:
    """Queue ``request.items`` (RunSpecs or JobCommands), one Slurm job each, as NeMo-Run experiment
    ``<title>_<label>`` (:func:`launchers.batch.slurm_batch`).

    ``state_dir``: the sweep's ``nemo_run/`` (NEMORUN_HOME); ``repo``: the git checkout shipped as the jobs'
    code; ``allow_dirty``: ship uncommitted changes too; ``allow_ssh_secrets``: write secrets into the job script
    over SSH (CONTRACTS §10); ``shell``: where sbatch/scancel run (the caller's, kept open; default one of its own,
    closed again). Returns once sbatch has queued every job (detached). Takes about 4 s the first time in a process
    (NeMo-Run's import), then ~0.1-0.3 s per job (git archive + sbatch).

    Raises:
        LaunchConfigError: bad profile, dirty tree without allow_dirty, not a git checkout, secrets over SSH.
        SchedulerError: sbatch missing or refusing a job (its message included); queued siblings were cancelled.
    """
    if not request.items:
        return []

    def build(run: Any, home: Path, packager_for: Any) -> Batch:
        return slurm_batch(run, request, home=home, packager_for=packager_for)

    batch, submitted, handles = _queue(request, build, state_dir=state_dir, repo=repo, allow_dirty=allow_dirty,
                                       allow_ssh_secrets=allow_ssh_secrets, shell=shell)
    return [_submission(batch, task, handles, submitted) for task in batch.tasks]


@dataclass(frozen=True)
class PackSubmission:
    """A packed allocation: Slurm ``job_id`` running ``runs`` in order (see :mod:`launchers.pack`)."""

    job: Submission
    runs: tuple[PackedRun, ...]


def submit_packed(request: BatchRequest, *, state_dir: str | Path, repo: str | Path, allow_dirty: bool = False,
                  allow_ssh_secrets: bool = False, shell: Shell | None = None) -> PackSubmission:
    """Queue ``request.items`` as ONE allocation that runs them one after another (``pack=true``,
    :func:`launchers.pack.pack_batch`), detached. Arguments and errors as :func:`submit_slurm`. Per-run states:
    :func:`launchers.pack.pack_states`.
    """
    runs: list[PackedRun] = []

    def build(run: Any, home: Path, packager_for: Any) -> Batch:
        batch, packed = pack_batch(run, request, home=home, packager_for=packager_for)
        runs.extend(packed)
        return batch

    batch, submitted, handles = _queue(request, build, state_dir=state_dir, repo=repo, allow_dirty=allow_dirty,
                                       allow_ssh_secrets=allow_ssh_secrets, shell=shell)
    return PackSubmission(job=_submission(batch, batch.tasks[0], handles, submitted), runs=tuple(runs))


def _queue(
    request: BatchRequest,
    build: Callable[[Any, Path, Any], Batch],
    *,
    state_dir: str | Path,
    repo: str | Path,
    allow_dirty: bool,
    allow_ssh_secrets: bool,
    shell: Shell | None,
) -> tuple[Batch, str, dict[str, str]]:
    """Check, build (``build(run, home, packager_for)``) and submit one batch (detached); returns it, the
    submission time and task -> job id.

    ``shell``: where scheduler commands run (the caller's, kept open); None: one of its own, closed at the end."""
    cluster, env = request.cluster, request.job_env
    written_secrets = _secrets_for_transport(cluster, env, allow_ssh_secrets)
    state = git_state(repo)
    check_clean(state, allow_dirty)
    own = shell is None
    shell = shell_for(cluster) if shell is None else shell
    try:
        # a clear error when sbatch is missing or the SSH tunnel is down, before anything is written
        res = shell(["sbatch", "--version"])
        if res.rc != 0:
            raise SchedulerError(f"sbatch --version failed on the cluster: {(res.err or res.out).strip()}")
        with nemorun_home(state_dir) as home:
            run = nemo_run()
            ref = ship_ref(state)

            def packager_for(files: Any) -> Any:
                return code_packager(state, ref=ref, allow_dirty=allow_dirty, extra_files=files)

            batch = build(run, home, packager_for)
            for task in batch.tasks:
                task.executor.env_vars.update(quoted_env(written_secrets))
            submitted = utc_now()
            exp = run.Experiment(batch.title, id=batch.exp_id, log_level="ERROR", clean_mode=True,
                                 enable_goodbye_message=False, skip_status_at_exit=True)
            try:
                _run_detached(exp, batch, cluster, shell, env.secrets if not written_secrets else {}, state.root,
                              state_dir)
            finally:
                _close_tunnels(run, exp, batch)
            # NeMo-Run copies the submitting program's source next to the experiment and exec()s it again in
            # Experiment.from_id (maybe_load_external_main); our tasks are scripts and need neither.
            (batch.exp_dir / "__main__.py").unlink(missing_ok=True)
            handles = {job.id: job_id_of(job.handle) for job in exp.jobs if job.handle}
            no_requeue(sorted(handles.values()), shell)
    finally:
        if own:
            close_shell(shell)
    missing = [t.name for t in batch.tasks if t.name not in handles]
    if missing:
        raise SchedulerError(f"NeMo-Run returned no Slurm job for {', '.join(missing)} in {batch.exp_id}")
    return batch, submitted, handles


def _run_detached(exp: Any, batch: Batch, cluster: ClusterConfig, shell: Shell, secrets: dict[str, str], root: Path,
                  state_dir: str | Path) -> None:
    """Submit ``batch``'s tasks as ``exp``, detached, from the checkout ``root`` with ``secrets`` in the environment
    sbatch exports; a failure cancels the jobs already queued. ``state_dir``: the sweep's NeMo-Run folder (the
    submitter marker).

    Raises:
        SchedulerError: sbatch refused a job or the transport failed (Slurm's message, the jobs cancelled again).
    """
    # the sbatch children carry the sweep's marker: a conductor that died mid-submission leaves them running, and
    # the next one waits for them before it looks its jobs up by name (launchers.procs.wait_for_submitters)
    marker = {} if cluster.remote else {SUBMITTER_ENV: submitter_marker(state_dir)}
    with in_dir(root), environ({**secrets, **marker}), no_stdin(), exp:
        for task in batch.tasks:
            exp.add(task.script, executor=task.executor, name=task.name)
        try:
            exp.run(detach=True)
        except (LaunchError, KeyboardInterrupt):
            _cancel_launched(exp, shell)
            raise
        except (Exception, SystemExit) as exc:  # NeMo-Run's SSH tunnel sys.exit()s on failed auth
            cancelled = _cancel_launched(exp, shell)
            note = f" (cancelled again: jobs {', '.join(cancelled)})" if cancelled else ""
            raise SchedulerError(
                f"submitting batch {batch.exp_id} to cluster {cluster.name!r} failed: "
                f"{_scheduler_message(exc)}{note}"
            ) from exc


def _close_tunnels(run: Any, exp: Any, batch: Batch) -> None:
    """Close the SSH connections the submission opened: the experiment's tunnels (NeMo-Run keeps one per cluster
    and leaves it open when the experiment is left detached) and the tasks' executors' own. A ``LocalTunnel`` holds
    no connection and is left as it is."""
    tunnels = [*exp.tunnels.values(), *(task.executor.tunnel for task in batch.tasks)]
    for tunnel in {id(t): t for t in tunnels}.values():
        if isinstance(tunnel, run.SSHTunnel):
            close_tunnel(tunnel)


def _cancel_launched(exp: Any, shell: Shell) -> list[str]:
    ids = [job_id_of(job.handle) for job in exp.jobs if getattr(job, "launched", False) and job.handle]
    with contextlib.suppress(SchedulerError):
        cancel(ids, shell)
    return ids


def _submission(batch: Batch, task: Task, handles: dict[str, str], submitted: str) -> Submission:
    script = mask_text((batch.exp_dir / f"{task.name}_sbatch.sh").read_text(), batch.env.secret_values())
    return Submission(name=task.name, job_id=handles[task.name], exp_id=batch.exp_id, job_dir=task.job_dir,
                      script=script, submitted=submitted, item=task.item, host_dir=task.host_dir)


def submit_collect(request: BatchRequest, *, after: Sequence[str], state_dir: str | Path, repo: str | Path,
                   allow_dirty: bool = False, shell: Shell | None = None) -> Submission:
    """Queue the collect job of ``request`` (one :func:`launchers.collect_job.collect_command`), held by
    ``--dependency=afterany:<after>`` until every run job of ``after`` (Slurm job ids) has ended
    (:func:`launchers.collect_job.collect_batch`). Other arguments and errors as :func:`submit_slurm`."""
    from launchers.collect_job import collect_batch

    def build(run: Any, home: Path, packager_for: Any) -> Batch:
        return collect_batch(run, request, home=home, after=after, packager_for=packager_for)

    batch, submitted, handles = _queue(request, build, state_dir=state_dir, repo=repo, allow_dirty=allow_dirty,
                                       allow_ssh_secrets=False, shell=shell)
    return _submission(batch, batch.tasks[0], handles, submitted)
