"""``pack=true``: the runs of a stage one after another in ONE Slurm allocation (one queue wait per stage).

The allocation is one NeMo-Run task (task name ``pack-<label>``) of its own experiment. Its sbatch script runs,
in NeMo-Run's ``setup_lines`` (plain bash in the batch script, after the environment exports), one ``srun`` step
per run, in order:

- step name = the run's name, so ``sacct -j <job>`` shows each run's own state (COMPLETED, FAILED, TIMEOUT ...);
- ``--time`` = the run's own budget (a hung run is stopped by Slurm: step state TIMEOUT, "DUE TO TIME LIMIT"
  in its log) and the next run starts;
- its own log ``runs/<run>/log-<job name>_<jobid>_<restart>.out`` (the same naming as one-job-per-run mode) and
  output folder ``runs/<run>/out``; its exit code in ``runs/<run>/exit_code``;
- a failing run does not stop the rest (the batch script runs with ``set +e``);
- after a requeue, runs whose ``exit_code`` is 0 are not run again.

NeMo-Run's own final srun step prints the table of exit codes and fails when any run failed, so the allocation's
state says whether the whole stage passed.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.cluster import ClusterConfig
from contracts.jobs import JobState
from contracts.slurm import format_time_limit, manifest_status
from contracts.statuses import ManifestStatus
from launchers.batch import (
    CONTAINER_JOB_ROOT,
    Batch,
    BatchRequest,
    Item,
    Task,
    env_script,
    item_command,
    remote_base,
)
from launchers.envvars import JobEnv, quote_args, quoted_env
from launchers.errors import LaunchConfigError, SchedulerError
from launchers.shell import Shell, local_shell
from launchers.slurm import JOB_NAME_PREFIX, check_path, default_python, pyxis_image, slurm_executor

PACK_MARGIN_S = 120  # allocation time on top of the runs' budgets: set-up, step start, the summary step
STEP_START_S = 15  # per run: srun start-up and teardown


@dataclass(frozen=True)
class PackedRun:
    """One run inside a packed allocation: its step ``name``, ``item`` (None where only its state is read:
    :func:`pack_states`), folder ``run_dir`` on this machine and ``host_run_dir`` on the cluster (the same path on a
    login node)."""

    name: str
    item: Item | None
    run_dir: Path
    host_run_dir: str = ""

    @property
    def out_dir(self) -> Path:
        """The payload's output folder (``effective_config.json`` lands here)."""
        return self.run_dir / "out"


RUNS = "runs"  # <allocation folder>/runs/<run>/: each packed run's own folder (log, exit_code, out/)


def allocation_folder(run_dir: str | Path) -> Path:
    """The allocation's task folder (its ``code/`` and code archive, shared by all its runs) of a packed run's
    folder ``<allocation folder>/runs/<run>`` (:attr:`PackedRun.run_dir`)."""
    return Path(run_dir).parent.parent


def pack_name(label: str) -> str:
    """Task / Slurm job name of a packed allocation: ``pack-<label>``."""
    return f"pack-{label}"


def allocation_time_s(run_time_s: int, n_runs: int) -> int:
    """The allocation's time limit: every run's budget plus start-up, plus ``PACK_MARGIN_S`` (seconds)."""
    return n_runs * (run_time_s + STEP_START_S) + PACK_MARGIN_S


def _container_flags(cluster: ClusterConfig, host_dir: str, env: JobEnv) -> list[str]:
    """The pyxis flags NeMo-Run gives its own srun (``get_container_flags``), for the packed steps."""
    image = cluster.container_image
    if not image:
        return []
    mounts = [str(m) for m in cluster.container_mounts] + [f"{host_dir}:{CONTAINER_JOB_ROOT}"]
    flags = ["--container-image", pyxis_image(str(image)), "--container-mounts", ",".join(mounts),
             "--container-workdir", f"{CONTAINER_JOB_ROOT}/code"]
    names = list(dict.fromkeys([*cluster.container_env, *env.plain, *env.secret_names]))
    return flags + (["--container-env", ",".join(names)] if names else [])


def _step_lines(i: int, n: int, run: PackedRun, host_run: str, argv: list[str], srun_flags: list[str],
                budget: str) -> list[str]:
    out = shlex.quote(f"{host_run}/log-{JOB_NAME_PREFIX}{run.name}_") + "%j_${SLURM_RESTART_COUNT:-0}.out"
    code = shlex.quote(f"{host_run}/exit_code")
    srun = ["srun", f"--job-name={run.name}", f"--time={budget}", "--wait=60", "--kill-on-bad-exit=1"]
    return [
        f"# run {i}/{n}: {run.name} (time budget {budget})",
        f"mkdir -p {shlex.quote(host_run)}",
        f'if [ "$(cat {code} 2>/dev/null)" != 0 ]; then',
        f"  {' '.join(quote_args(srun))} --output {out} {' '.join(quote_args(srun_flags))} "
        f"env {' '.join(quote_args(argv))}",
        f"  echo $? > {code}.tmp && mv {code}.tmp {code}",
        "fi",
    ]


def pack_batch(run: Any, request: BatchRequest, *, home: Path,
               packager_for: Any = None) -> tuple[Batch, tuple[PackedRun, ...]]:
    """One allocation (a one-task batch) running ``request.items`` in order; see the module docstring.

    Each run gets ``request.run_time_s`` (default ``cluster.time_limit``) as its own time limit; the allocation
    gets :func:`allocation_time_s`. Other fields and arguments as :func:`launchers.batch.slurm_batch`.

    Raises:
        LaunchConfigError: no items, duplicate names, or a profile problem.
    """
    items, cluster, env = request.items, request.cluster, request.job_env
    title, exp_id = request.title, request.exp_id
    if not items:
        raise LaunchConfigError("pack=true with no runs to pack")
    names = [i.name for i in items]
    if len(set(names)) != len(names):
        raise LaunchConfigError(f"two packed runs share a name: {sorted(n for n in names if names.count(n) > 1)}")
    name = pack_name(request.label)
    python = request.python or default_python(cluster)
    budget_s = request.run_time_s or cluster.time_limit_s
    host_dir = check_path(os.path.join(remote_base(cluster, home), title, exp_id, name), "job folder")
    job_root = CONTAINER_JOB_ROOT if cluster.container_image else host_dir
    flags = [*_container_flags(cluster, host_dir, env), *request.srun_args]
    if not cluster.container_image:
        flags = ["--chdir", f"{host_dir}/code", *flags]
    local_dir = home / "experiments" / title / exp_id / name
    runs: list[PackedRun] = []
    files: list[Any] = []
    lines: list[str] = []
    extra_env: dict[str, str] = {}
    for i, item in enumerate(items, 1):
        packed = PackedRun(name=item.name, item=item, run_dir=local_dir / RUNS / item.name,
                           host_run_dir=f"{host_dir}/{RUNS}/{item.name}")
        argv, shipped, item_env = item_command(item, python, f"{job_root}/code", f"{job_root}/{RUNS}/{item.name}/out")
        files += shipped
        extra_env.update(item_env)
        lines += _step_lines(i, len(items), packed, packed.host_run_dir, argv, flags,
                             format_time_limit(budget_s))
        runs.append(packed)
    summary = ("rc=0; for n in " + " ".join(shlex.quote(n) for n in names) + "; do "
               'c=$(cat "../runs/$n/exit_code" 2>/dev/null || echo missing); echo "packed run $n exit_code=$c"; '
               '[ "$c" = 0 ] || rc=1; done; exit $rc')
    packager = packager_for(tuple(files)) if packager_for else run.Packager()
    executor = slurm_executor(run, cluster, home=home, env=env, packager=packager,
                              time_limit_s=allocation_time_s(budget_s, len(items)), srun_args=request.srun_args)
    executor.env_vars.update(quoted_env(extra_env))
    executor.srun_args = None  # the runs' steps carry them; the summary step needs none
    executor.setup_lines = "\n".join(["", "# ---- packed runs (launchers/pack.py) ----", *lines, ""])
    task = Task(name=name, script=env_script(run, ["bash", "-c", summary]), executor=executor, item=items[0],
                job_dir=local_dir, job_root=job_root, host_dir=host_dir, files=tuple(files))
    return Batch(title=title, exp_id=exp_id, home=home, tasks=(task,), env=env), tuple(runs)


def pack_states(job_id: str, runs: Sequence[PackedRun], shell: Shell = local_shell) -> dict[str, JobState]:
    """Each packed run's state, from its srun step in sacct (named after the run) and the allocation's state.

    A run with no step yet is ``submitted`` while the allocation is queued or running; once the allocation is
    over, a run that never got a step takes the allocation's final status (``cancelled``, ``timeout``), else
    ``lost``. After a requeue the latest step of a name counts.

    Raises:
        SchedulerError: sacct failed.
    """
    res = shell(["sacct", "-n", "-P", "-j", str(job_id), "-o", "JobID,JobName,State,ExitCode,ElapsedRaw,NodeList"])
    if res.rc != 0:
        raise SchedulerError(f"sacct failed (is slurmdbd up?): {res.err.strip()}")
    alloc: JobState | None = None
    steps: dict[str, JobState] = {}
    for line in res.out.splitlines():
        jid, jname, state, code, elapsed, nodes = (line.split("|") + [""] * 6)[:6]
        c, _, sig = code.partition(":")
        js = JobState(manifest_status(state), jid, state, int(c) if c.isdigit() else None,
                      int(sig) if sig.isdigit() else None, int(elapsed) if elapsed.isdigit() else None, nodes)
        if jid == str(job_id):
            alloc = js
        elif "." in jid and jid.split(".", 1)[1].isdigit():
            steps[jname] = js  # sacct lists steps in order: the last one of a name is the latest
    out = {}
    for r in runs:
        if r.name in steps:
            out[r.name] = steps[r.name]
        elif alloc is None or not alloc.final:
            out[r.name] = JobState(ManifestStatus.SUBMITTED, str(job_id), "PENDING",
                                   reason="waiting for its turn in the pack")
        else:
            status = alloc.status if alloc.status in (ManifestStatus.CANCELLED, ManifestStatus.TIMEOUT) \
                else ManifestStatus.LOST
            out[r.name] = JobState(status, str(job_id), alloc.state, reason="the allocation ended before this run")
    return out


def cancel_packed_run(job_id: str, name: str, shell: Shell = local_shell) -> bool:
    """Cancel the running step of packed run ``name`` (the next run then starts). False if it is not running.

    Raises:
        SchedulerError: squeue or scancel failed.
    """
    res = shell(["squeue", "-h", "-s", "-j", str(job_id), "-o", "%i|%j"])
    if res.rc != 0 and "Invalid job id" not in res.err:
        raise SchedulerError(f"squeue failed: {res.err.strip()}")
    steps = [line.split("|")[0] for line in res.out.splitlines() if line.split("|")[-1] == name]
    if not steps:
        return False
    res = shell(["scancel", steps[-1]])
    if res.rc != 0:
        raise SchedulerError(f"scancel {steps[-1]} failed: {res.err.strip()}")
    return True
