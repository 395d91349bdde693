"""``run.LocalExecutor`` (the embedded default, ``cluster=local``): torchrun over the local GPUs, or one process.

With N >= 1 GPUs: NeMo-Run's torchrun launcher, ``--nproc-per-node N`` on one node (rendezvous on a free port,
``localhost:0``). Without a GPU: one plain process (validate mode needs no ranks; CONTRACTS §1, §9).
No packager: the job runs in the checkout itself, which need not be a git repository.

NeMo-Run's torchrun component shell-quotes every argument although the local scheduler starts it without a
shell (``'x y'`` arrives with its quotes), so paths given to a local run must be single plain words.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from contracts.cluster import ClusterConfig
from launchers.batch import Batch, BatchRequest, Task
from launchers.envvars import JobEnv, mask_text
from launchers.errors import LaunchConfigError
from launchers.home import nemorun_home_path
from launchers.slurm import check_path
from launchers.spec import RunSpec

RDZV_ID = 1  # fixed torchrun --rdzv-id (NeMo-Run picks a random one otherwise): the command is reproducible


def detect_gpus() -> int:
    """Number of GPUs this process may use: :func:`gpu_names`' length; 0 without a GPU."""
    return len(gpu_names())


@functools.lru_cache(maxsize=4)
def _smi_names(smi: str) -> tuple[str, ...]:
    try:
        out = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return tuple(n.strip() for n in out.stdout.splitlines() if n.strip()) if out.returncode == 0 else ()


def gpu_names() -> list[str]:
    """Names of the GPUs this process may use, in index order: one ``nvidia-smi --query-gpu=name`` line per GPU
    (asked once per process: each call costs a driver query, 0.1-2 s on a GPU box), the first N of them when
    ``CUDA_VISIBLE_DEVICES`` lists N devices; [] without nvidia-smi or a GPU."""
    smi = shutil.which("nvidia-smi")
    names = list(_smi_names(smi)) if smi else []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        names = names[: len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])]
    return names


def local_gpus(cluster: ClusterConfig, gpus: int | None = None) -> int:
    """GPUs a local run uses: ``gpus`` if given, else ``cluster.gpus_per_node`` (``auto`` = detected).

    Raises:
        LaunchConfigError: a fixed number above what this machine has.
    """
    if gpus is not None:
        return gpus
    wanted = cluster.gpus_per_node
    found = detect_gpus()
    if wanted == "auto":
        return found
    if int(wanted) > found:
        raise LaunchConfigError(
            f"cluster.gpus_per_node={wanted} but this machine has {found} usable GPU(s); "
            "use cluster.gpus_per_node=auto or a smaller number"
        )
    return int(wanted)


def _job_path() -> str:
    """PATH for the job: this interpreter's folder first, so ``torchrun`` and ``python`` are the venv's."""
    bindir = os.path.dirname(sys.executable)
    path = os.environ.get("PATH", "")
    return path if bindir in path.split(os.pathsep) else os.pathsep.join([bindir, path])


def local_executor(run: Any, *, env: JobEnv, gpus: int) -> Any:
    """A ``run.LocalExecutor``: torchrun with ``gpus`` processes, or one process when ``gpus`` is 0.

    Only ``env.plain`` goes into the executor (NeMo-Run writes it into its config files); secrets reach the
    process from this process's environment.
    """
    launcher = run.Torchrun(rdzv_id=RDZV_ID) if gpus >= 1 else None
    env_vars = dict(env.plain)
    env_vars["PATH"] = _job_path()
    return run.LocalExecutor(ntasks_per_node=max(gpus, 1), nodes=1, launcher=launcher, env_vars=env_vars)


def local_batch(run: Any, request: BatchRequest, *, home: Path) -> Batch:
    """The local tasks of ``request`` (nothing is written or started), with ``request.gpus`` GPUs each
    (:func:`local_gpus`); see :func:`launchers.batch.slurm_batch`.

    Raises:
        LaunchConfigError: more GPUs than this machine has, or a path torchrun would mangle.
    """
    gpus = local_gpus(request.cluster, request.gpus)
    python = request.python or sys.executable
    tasks = []
    for item in request.items:
        job_dir = home / "experiments" / request.title / request.exp_id / item.name
        if isinstance(item, RunSpec):
            variant_json = check_path(Path(os.path.abspath(item.variant_json)), "variant file")
            out_dir = check_path(job_dir / "out", "output folder")
            args = item.payload_args(variant_json, out_dir)
            script = run.Script(path=args[1], m=True, args=args[2:], entrypoint=python)
        else:
            argv = list(item.argv)
            script = run.Script(path=argv[0], args=argv[1:], entrypoint="env")
        if gpus >= 1:
            _check_torchrun_words(script)
        executor = local_executor(run, env=request.job_env, gpus=gpus)
        if not isinstance(item, RunSpec):
            executor.env_vars.update(item.env)
        tasks.append(Task(name=item.name, script=script, executor=executor, item=item, job_dir=job_dir,
                          job_root=str(job_dir)))
    return Batch(title=request.title, exp_id=request.exp_id, home=home, tasks=tuple(tasks), env=request.job_env)


def _check_torchrun_words(script: Any) -> None:
    """Refuse arguments NeMo-Run's torchrun component would shell-quote (see the module docstring).

    Raises:
        LaunchConfigError: naming the argument.
    """
    for word in [script.path, *script.args]:
        if shlex.quote(str(word)) != str(word):
            raise LaunchConfigError(
                f"argument {word!r} of a local torchrun launch has spaces or shell characters; NeMo-Run 0.11.1's "
                "torchrun launcher would pass it with literal quotes. Use plain words (paths of letters, digits, ._-/)"
            )


def local_argv(run: Any, task: Task) -> list[str]:
    """The exact command NeMo-Run's local scheduler starts for ``task`` (entrypoint + arguments)."""
    from nemo_run.run.torchx_backend.packaging import package

    app = package(task.name, task.script, task.executor, serialize_to_file=False,
                  serialize_metadata_for_scripts=False)
    role = app.roles[0]
    return [role.entrypoint, *role.args]


def render_local(request: BatchRequest, *, state_dir: str | Path, cwd: str | Path | None = None) -> str:
    """The local run of a one-item ``request`` as a shell script: its environment (secrets as ``***``), the folder
    it runs in (``cwd``, default this process's) and its exact command. ``state_dir``: the sweep's ``nemo_run/``.

    Raises:
        LaunchConfigError: the request has other than one item, or :func:`local_batch` refuses it.
    """
    from launchers.home import nemo_run

    if len(request.items) != 1:
        raise LaunchConfigError(f"a local job script is rendered for one run, not {len(request.items)}")
    run = nemo_run()
    env = request.job_env
    n = local_gpus(request.cluster, request.gpus)
    task = local_batch(run, request, home=nemorun_home_path(state_dir)).tasks[0]
    argv = local_argv(run, task)
    lines = ["#!/bin/bash", f"# Local run {task.name} through NeMo-Run's LocalExecutor "
             f"({'torchrun, ' + str(n) + ' GPU(s)' if n else 'one process, no GPU'})"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(env.masked().items())]
    lines.append(f"cd {shlex.quote(str(cwd or os.getcwd()))}")
    # the torchrun component already quoted its arguments; the entrypoint and plain Script args are not
    words = argv if n else [shlex.quote(w) for w in argv]
    lines.append(" ".join(words))
    return mask_text("\n".join(lines) + "\n", env.secret_values())
