"""The collect of a detached Slurm sweep as a small Slurm job of its own, queued behind the sweep's run jobs.

``sbatch --dependency=afterany:<run jobs>`` (sbatch(1), ``--dependency``: ``afterany`` starts the job once every
listed job has ended, whatever its state) holds the job until the last run ends, so the sweep is collected, analysed
and recorded then, without a cron line guessed to run after the jobs. The dependency goes through NeMo-Run's own
support (``SlurmExecutor.dependencies`` / ``dependency_type``, nemo_run/core/execution/slurm.py, 0.11.1): it takes
TorchX app handles and passes their Slurm job ids to ``#SBATCH --dependency`` and to sbatch.

The job runs ``python -m experiments.sweep action=collect sweep_id=<id> output_dir=<folder> detach=true`` in the
checkout that submitted it, with its interpreter (a login-node cluster shares the filesystem with its nodes): a gate
opened by that collect is queued detached and chained again, so the job itself stays short. It asks for one task on
one node, no GPU, not exclusive, on the profile's account and partition, bare metal (a container would not have the
checkout's virtual environment), with a time limit of ``COLLECT_TIME_S``.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from launchers.batch import Batch, BatchRequest, remote_base, slurm_batch
from launchers.errors import LaunchConfigError
from launchers.slurm import check_path
from launchers.spec import JobCommand

COLLECT_NAME = "collect"
COLLECT_TIME_S = 1800  # s: collect, analyse, record history; the runs' queue wait is the dependency's, not this
DEPENDENCY_TYPE = "afterany"  # sbatch(1): the collect starts when every run job has ended, in any state
HANDLE_PREFIX = "slurm_tunnel://nemo_run/"  # a TorchX app handle NeMo-Run's parse_deps reads the job id from


def collect_command(sweep_id: str, sweep_dir: Path, *, repo: Path, python: str | None = None,
                    overrides: Sequence[str] = ()) -> JobCommand:
    """The collect of ``sweep_id`` (folder ``sweep_dir``) as a job command run in the checkout ``repo``.

    ``python``: the interpreter (default this one, ``sys.executable``: the venv that submitted). ``overrides``:
    further Hydra overrides of the collect (``history.notify=env:NAME``), never a secret's value. The command
    changes into ``repo`` first: the job's own ``code/`` folder is a copy of the committed tree without its git
    state, and ``python -m`` puts the working folder first on ``sys.path``.
    """
    words = [python or sys.executable, "-m", "experiments.sweep", "action=collect", f"sweep_id={sweep_id}",
             f"output_dir={Path(sweep_dir)}", "detach=true", *overrides]
    return JobCommand(name=COLLECT_NAME, argv=("bash", "-c", f"cd {shlex.quote(str(repo))} && exec {shlex.join(words)}"))


def dependency_handles(job_ids: Sequence[str]) -> list[str]:
    """TorchX app handles for Slurm ``job_ids`` (duplicates dropped, order kept): what
    ``SlurmExecutor.dependencies`` takes (its ``parse_deps`` reads the id after ``://<app>/``).

    Raises:
        LaunchConfigError: no job id, or one that is not a Slurm job id (digits, ``<array>_<task>``).
    """
    ids = list(dict.fromkeys(str(j) for j in job_ids if j))
    bad = [j for j in ids if not j.replace("_", "").isdigit()]
    if not ids or bad:
        raise LaunchConfigError(f"a chained collect needs the Slurm job ids of the runs, got {list(job_ids)!r}"
                                + (f" ({', '.join(bad)} not a job id)" if bad else ""))
    return [f"{HANDLE_PREFIX}{j}" for j in ids]


def collect_batch(run: Any, request: BatchRequest, *, home: Path, after: Sequence[str],
                  packager_for: Any = None) -> Batch:
    """The one-task batch of the collect job (``request.items``: one :func:`collect_command`), held until every job
    of ``after`` (Slurm job ids) has ended. Arguments as :func:`launchers.batch.slurm_batch`.

    Raises:
        LaunchConfigError: not exactly one item, no job ids, a remote profile (the cluster's nodes do not share this
            checkout), or a profile problem.
    """
    if len(request.items) != 1 or not isinstance(request.items[0], JobCommand):
        raise LaunchConfigError("a collect job is one JobCommand (launchers.collect_job.collect_command)")
    if request.cluster.remote:
        raise LaunchConfigError(f"cluster {request.cluster.name!r} is reached over SSH: its nodes do not have this "
                                "checkout, so the collect cannot be chained; run action=collect from here")
    # bare metal, one task, no GPU, not exclusive: the collect reads files and asks sacct
    profile = dataclasses.replace(request.cluster, nodes=1, exclusive=False, container_image=None,
                                  container_mounts=(), container_env=())
    handles = dependency_handles(after)
    request = dataclasses.replace(request, cluster=profile, time_limit_s=request.time_limit_s or COLLECT_TIME_S,
                                  srun_args=())
    check_path(remote_base(profile, home), "job folder")
    batch = slurm_batch(run, request, home=home, packager_for=packager_for)
    executor = batch.tasks[0].executor
    executor.gpus_per_node = None
    executor.ntasks_per_node = 1
    executor.dependencies = handles
    executor.dependency_type = DEPENDENCY_TYPE
    return batch
