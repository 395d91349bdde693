"""The exact job script of one run, for ``variants/<name>/job.sh`` (CONTRACTS §3), without submitting.

Slurm: NeMo-Run's own sbatch text, made by NeMo-Run's dry run through the same batch builder that submits
(:mod:`launchers.batch`), in a scratch NEMORUN_HOME whose path is then replaced by the sweep's (NeMo-Run's
``Experiment.dryrun`` prints the script and deletes its folder, so it is captured here instead). Local: the
command line the LocalExecutor runs. Secret values never appear: they are not in the script to begin with, and
any that would be are masked as ``***`` (CONTRACTS §10).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from launchers import cluster as cl
from launchers.batch import Batch, Item, slurm_batch
from launchers.envvars import JobEnv, cluster_env, mask_text
from launchers.home import nemo_run, nemorun_home, nemorun_home_path, no_stdin

DEFAULT_TITLE = "sweep"


def render_slurm_batch(
    cluster: Any,
    items: Sequence[Item],
    *,
    state_dir: str | Path,
    title: str = DEFAULT_TITLE,
    label: str = "s1",
    python: str | None = None,
    env: JobEnv | None = None,
    time_limit_s: int | None = None,
    srun_args: Sequence[str] = (),
) -> dict[str, str]:
    """Task name -> sbatch script text NeMo-Run would submit for ``items`` as batch ``<title>_<label>``.

    ``state_dir`` is the sweep's ``nemo_run/`` (it need not exist). Other arguments as
    :func:`launchers.batch.slurm_batch`. Imports NeMo-Run (about 4 s the first time).
    """
    env = env or cluster_env(cluster)
    return _render(lambda run, home: slurm_batch(run, cluster, items, home=home, title=title, label=label,
                                                 python=python, env=env, time_limit_s=time_limit_s,
                                                 srun_args=srun_args), state_dir, env)


def _render(build: Callable[[Any, Path], Batch], state_dir: str | Path, env: JobEnv) -> dict[str, str]:
    """Dry-run ``build(run, home)``'s batch in a scratch NEMORUN_HOME; return its scripts with the sweep's paths."""
    real_home = nemorun_home_path(state_dir)
    scratch = Path(tempfile.mkdtemp(prefix="moe-render-"))
    try:
        with nemorun_home(scratch / "home") as home, no_stdin():
            run = nemo_run()
            batch = build(run, home)
            with run.Experiment(batch.title, id=batch.exp_id, log_level="ERROR", clean_mode=True,
                                enable_goodbye_message=False, skip_status_at_exit=True) as exp:
                for task in batch.tasks:
                    exp.add(task.script, executor=task.executor, name=task.name)
                exp.dryrun(log=False, delete_exp_dir=False)
            texts = {t.name: (batch.exp_dir / f"{t.name}_sbatch.sh").read_text() for t in batch.tasks}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    secrets = env.secret_values()
    return {name: mask_text(text.replace(str(home), str(real_home)), secrets) for name, text in texts.items()}


def render_job_script(cluster: Any, item: Item, *, state_dir: str | Path, **kwargs: Any) -> str:
    """The job script of one run or command: sbatch text on Slurm, the command line on the local executor.

    ``cluster``: a ClusterConfig or mapping; ``item``: a :class:`launchers.spec.RunSpec` (or JobCommand);
    ``state_dir``: the sweep's ``nemo_run/``; further keyword arguments as :func:`render_slurm_batch`
    (``title``, ``label``, ``python``, ``env``, ``time_limit_s``, ``srun_args``) or, locally,
    :func:`launchers.local.local_command` (``gpus``, ``python``, ``env``).

    Raises:
        LaunchConfigError: the profile or the item cannot be launched (names the field and the fix).
    """
    if cl.get(cluster, "executor", "local") == "local":
        from launchers.local import render_local

        return render_local(cluster, item, state_dir=state_dir, **kwargs)
    return render_slurm_batch(cluster, [item], state_dir=state_dir, **kwargs)[item.name]
