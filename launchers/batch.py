"""A submission batch: the NeMo-Run tasks (one Slurm job each) for a list of runs or commands.

One batch is one NeMo-Run experiment with id ``<title>_<label>`` (NeMo-Run's ``{title}_{suffix}`` form, found
again by ``Experiment.from_id``), in the sweep's NEMORUN_HOME. Task ``<name>`` of it lives in
``<home>/experiments/<title>/<title>_<label>/<name>/`` (FACTS §5): ``code/`` (the git archive, plus the run's
``variants/<variant>/variant.json``), ``out/`` (the payload's output folder), and NeMo-Run's
``log-<job name>_<jobid>_<restart>.out`` rank logs and ``sbatch_<job name>_<jobid>.out``.

What a batch is built from is one :class:`BatchRequest`, whichever backend builds it (:func:`slurm_batch`,
:func:`launchers.local.local_batch`, :func:`launchers.pack.pack_batch`); rendering (:mod:`launchers.render`) and
submitting (:mod:`launchers.submit`) take the same request and build the batch through the same function, so the
rendered script is the submitted one.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts.cluster import ClusterConfig
from launchers.envvars import JobEnv, cluster_env, quote_args, quoted_env
from launchers.errors import LaunchConfigError
from launchers.slurm import JOB_NAME_PREFIX, check_path, default_python, slurm_executor
from launchers.spec import JobCommand, RunSpec

_LABEL = re.compile(r"^[A-Za-z0-9.-]{1,40}$")
CONTAINER_JOB_ROOT = "/nemo_run"  # where pyxis mounts the task folder (NeMo-Run's RUNDIR_NAME)
DEFAULT_TITLE = "sweep"
RDZV_ID = 1  # fixed torchrun --rdzv-id (NeMo-Run picks a random one): the job script is reproducible
# the rendezvous port of a multi-node job, from its job id (see torchrun_across_nodes): 20000-31999, below Linux's
# default ephemeral port range (32768-60999), so no outgoing connection of the host holds it by chance
RDZV_PORT_SETUP = "rdzv_port=$((20000 + SLURM_JOB_ID % 12000))"
RDZV_PORT_SHELL = "${rdzv_port}"

Item = RunSpec | JobCommand


def experiment_id(title: str, label: str) -> str:
    """``<title>_<label>``. ``label`` has no ``_`` (NeMo-Run splits the id at its last ``_``).

    Raises:
        LaunchConfigError: a label that is empty, too long or has characters other than ``[A-Za-z0-9.-]``.
    """
    if not _LABEL.match(label):
        raise LaunchConfigError(f"batch label {label!r} must match [A-Za-z0-9.-]{{1,40}} (no '_')")
    return f"{title}_{label}"


def batch_label(stage: int, submission: int = 1) -> str:
    """The label of the ``submission``-th batch of stage ``stage``: ``s1``, then ``s1.r2``, ``s1.r3`` (resumes)."""
    return f"s{stage}" if submission <= 1 else f"s{stage}.r{submission}"


@dataclass(frozen=True, kw_only=True)
class BatchRequest:
    """What one batch is built from, whichever backend builds it: a typed record of everything that is rendered,
    as NeMo-Run's ``SlurmBatchRequest`` holds what its sbatch script is materialised from.

    ``cluster``: the typed profile (build one from a mapping with :meth:`ClusterConfig.from_mapping`);
    ``items``: RunSpecs or JobCommands, one task each (packed: one step each); ``title`` and ``label``: the NeMo-Run
    experiment ``<title>_<label>`` (:func:`experiment_id`); ``python``: the job's interpreter (default
    :func:`launchers.slurm.default_python` on Slurm, this interpreter locally); ``env``: the job environment (default
    the profile's, :func:`launchers.envvars.cluster_env`); ``time_limit_s``: a Slurm job's limit in seconds instead
    of ``cluster.time_limit``; ``run_time_s``: each packed run's own limit (default ``cluster.time_limit``);
    ``srun_args``: extra srun arguments, each kept one shell word; ``gpus``: GPUs of a local run (default
    ``cluster.gpus_per_node``, ``auto`` = detected).

    Raises:
        LaunchConfigError: ``cluster`` is not a ClusterConfig, or the label is not a valid batch label.
    """

    cluster: ClusterConfig
    items: tuple[Item, ...]
    label: str
    title: str = DEFAULT_TITLE
    python: str | None = None
    env: JobEnv | None = None
    time_limit_s: int | None = None
    run_time_s: int | None = None
    srun_args: tuple[str, ...] = ()
    gpus: int | None = None
    job_env: JobEnv = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.cluster, ClusterConfig):
            raise LaunchConfigError(
                f"a batch needs a contracts.cluster.ClusterConfig, not {type(self.cluster).__name__}; build one "
                "from a mapping of the profile's fields with ClusterConfig.from_mapping(...)")
        experiment_id(self.title, self.label)  # checks the label
        object.__setattr__(self, "items", tuple(self.items))
        object.__setattr__(self, "srun_args", tuple(self.srun_args))
        object.__setattr__(self, "job_env", self.env or cluster_env(self.cluster))

    @property
    def exp_id(self) -> str:
        """The NeMo-Run experiment id ``<title>_<label>``."""
        return experiment_id(self.title, self.label)


@dataclass(frozen=True)
class Task:
    """One NeMo-Run task (one Slurm job): its ``name``, ``script`` (run.Script), ``executor``, and ``item``.

    ``job_dir`` is the task folder as the submitting machine writes it; ``job_root`` the same folder as the
    job sees it (the real path, or ``/nemo_run`` in a container); ``host_dir`` as the cluster's filesystem has
    it (equal to ``job_dir`` on a login node, under ``cluster.tunnel.job_dir`` over SSH; logs are written there).
    ``files`` are (file, base) pairs shipped into ``code/`` at their path relative to base.
    """

    name: str
    script: Any
    executor: Any
    item: Item
    job_dir: Path
    job_root: str
    host_dir: str = ""
    files: tuple[tuple[Path, Path], ...] = ()

    @property
    def job_name(self) -> str:
        """The Slurm job name (NeMo-Run prefixes the task name)."""
        return f"{JOB_NAME_PREFIX}{self.name}"


@dataclass(frozen=True)
class Batch:
    """The tasks of one NeMo-Run experiment ``exp_id`` (title ``title``) in NEMORUN_HOME ``home``."""

    title: str
    exp_id: str
    home: Path
    tasks: tuple[Task, ...]
    env: JobEnv

    @property
    def exp_dir(self) -> Path:
        """The experiment folder NeMo-Run writes (its ``<task>_sbatch.sh`` files sit here)."""
        return self.home / "experiments" / self.title / self.exp_id


def _shipped(variant_json: Path) -> tuple[Path, Path]:
    """(file, base): ``variants/<v>/variant.json`` relative to the sweep folder when laid out so (CONTRACTS §3)."""
    path = Path(os.path.abspath(variant_json))
    if not path.is_file():
        raise LaunchConfigError(f"variant file {path} does not exist (written by the planner: action=plan)")
    base = path.parents[2] if path.parent.parent.name == "variants" else path.parent
    return path, base


def item_command(item: Item, python: str, code_dir: str, out_dir: str) -> tuple[
        list[str], tuple[tuple[Path, Path], ...], dict[str, str]]:
    """(argv, shipped files, extra env) of one item, given its code and output folders as the job sees them.

    A RunSpec runs the payload on its variant.json, shipped into ``<code_dir>/variants/<v>/variant.json``,
    writing to ``out_dir``; a JobCommand runs as given.
    """
    if isinstance(item, RunSpec):
        shipped, ship_base = _shipped(item.variant_json)
        rel = shipped.relative_to(ship_base).as_posix()
        return [python, *item.payload_args(f"{code_dir}/{rel}", out_dir)], ((shipped, ship_base),), {}
    return list(item.argv), (), dict(item.env)


def env_script(run: Any, argv: Sequence[str]) -> Any:
    """``run.Script`` running ``argv`` through ``env``. NeMo-Run joins entrypoint and arguments with spaces and
    quotes nothing (FACTS §5, CASES C11), so every word is shell-quoted here."""
    words = quote_args(argv)
    return run.Script(path=words[0], args=words[1:], entrypoint="env")


def multinode(cluster: ClusterConfig) -> bool:
    """True when a run of ``cluster`` spans more than one node (its payload then starts through torchrun)."""
    return int(cluster.nodes or 1) > 1


def torchrun_across_nodes(run: Any, executor: Any, argv: Sequence[str]) -> Any:
    """Switch ``executor`` to NeMo-Run's torchrun launcher and return the payload's ``run.Script`` for it.

    NeMo-Run's SlurmExecutor with ``run.Torchrun`` (nemo_run 0.11.1 ``core/execution/slurm.py`` ``_setup_launcher``,
    ``run/torchx_backend/components/torchrun.py``) starts one torchrun agent per node (``ntasks_per_node=1``,
    ``--nproc-per-node`` = the GPUs) with a c10d rendezvous on ``$head_node_ip:<port>`` (the first node of the
    allocation, which the job script looks up) and ``--node-rank $SLURM_NODEID``; torchrun gives each worker
    ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``. The port is the job's own
    (:data:`RDZV_PORT_SHELL`, from ``$SLURM_JOB_ID``): two jobs whose first nodes share an address (emulated nodes of
    one host) never meet in one store, and the script of a run does not depend on its name. Two agents of one job
    on one host are fine: torch hosts the store in one of them and the other joins as a client
    (torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py ``_create_tcp_store``, 2.x).

    ``argv``: ``[python, "-m", module, args...]`` as :func:`item_command` builds it; an absolute ``python`` (bare
    metal) puts its folder first on the job's ``PATH``, so that ``torchrun`` is that environment's.

    Raises:
        LaunchConfigError: ``argv`` is not a ``python -m module`` command.
    """
    if len(argv) < 3 or argv[1] != "-m":
        raise LaunchConfigError(f"a multi-node run starts a Python module through torchrun, not {list(argv)!r}")
    executor.launcher = run.Torchrun(rdzv_id=RDZV_ID, rdzv_port=RDZV_PORT_SHELL)
    setup = [RDZV_PORT_SETUP]
    if os.path.isabs(argv[0]):  # bare metal: the torchrun next to the job's interpreter (a venv need not be active)
        setup.append(f"export PATH={shlex.quote(os.path.dirname(argv[0]))}:$PATH")
    executor.setup_lines = "\n".join(setup)
    return run.Script(path=argv[2], m=True, args=quote_args(argv[3:]), entrypoint=argv[0])


def remote_base(cluster: ClusterConfig, home: Path) -> str:
    """The experiments folder as the cluster sees it (``tunnel.job_dir`` over SSH)."""
    return str(cluster.tunnel.job_dir) if cluster.remote else str(home / "experiments")


def slurm_batch(run: Any, request: BatchRequest, *, home: Path, packager_for: Any = None) -> Batch:
    """Build the Slurm tasks of ``request``, one job per item (nothing is written or submitted).

    ``run``: the imported nemo_run module; ``home``: the NEMORUN_HOME in use (:mod:`launchers.home`);
    ``packager_for(files)`` returns the packager of a task given its extra ``(file, base)`` pairs (default: the
    no-op ``run.Packager()``; rendering needs no git).

    Raises:
        LaunchConfigError: bad names or paths, duplicate task names, or a profile problem.
    """
    cluster, env = request.cluster, request.job_env
    python = request.python or default_python(cluster)
    base = remote_base(cluster, home)
    tasks: list[Task] = []
    seen: set[str] = set()
    for item in request.items:
        name = item.name
        if name in seen:
            raise LaunchConfigError(f"two runs of one batch are both named {name!r}")
        seen.add(name)
        host_dir = check_path(os.path.join(base, request.title, request.exp_id, name), "job folder")
        job_root = CONTAINER_JOB_ROOT if cluster.container_image else host_dir
        argv, files, extra_env = item_command(item, python, f"{job_root}/code", f"{job_root}/out")
        packager = packager_for(files) if packager_for else run.Packager()
        nodes = item.nodes if isinstance(item, JobCommand) and item.nodes else None  # a command over n nodes
        executor = slurm_executor(run, cluster, home=home, env=env, packager=packager,
                                  time_limit_s=request.time_limit_s, srun_args=request.srun_args, nodes=nodes)
        executor.env_vars.update(quoted_env(extra_env))
        script = env_script(run, argv)
        if (isinstance(item, RunSpec) and multinode(cluster)) or (nodes or 0) > 1:
            script = torchrun_across_nodes(run, executor, argv)
        tasks.append(Task(name=name, script=script, executor=executor, item=item,
                          job_dir=home / "experiments" / request.title / request.exp_id / name, job_root=job_root,
                          host_dir=host_dir, files=files))
    return Batch(title=request.title, exp_id=request.exp_id, home=home, tasks=tuple(tasks), env=env)
