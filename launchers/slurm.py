"""``run.SlurmExecutor`` from a cluster profile (conf/cluster/*.yaml, CONTRACTS §9).

One task per GPU: ``ntasks_per_node = gpus_per_node`` (the payload reads its rank from Slurm). Tunnels:
``LocalTunnel`` on a login node, whose job folder must be ``$NEMORUN_HOME/experiments`` (NeMo-Run writes the
script there and submits that path; FACTS §5), or ``SSHTunnel`` with a key file for unattended use.
Containers go through pyxis (``--container-image/--container-mounts/--container-env``); ``container_image: null``
gives plain ``srun --chdir <job>/code`` (bare metal, the local test cluster).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from contracts.cluster import ClusterConfig
from contracts.slurm import format_time_limit
from launchers.envvars import JobEnv, quote_args, quoted_env
from launchers.errors import LaunchConfigError, SchedulerError
from launchers.home import RUNDIR_TOKEN

JOB_NAME_PREFIX = "moe."
# Time-limit warning: sbatch --signal=TERM@60 sends SIGTERM to every job step 60 s before the limit (the payload
# flushes and says so). Slurm may send it up to 60 s early (sbatch(1), --signal), so short limits get none.
SIGNAL = "TERM"
SIGNAL_LEAD_S = 60
SIGNAL_MIN_LIMIT_S = 600
# NeMo-Run 0.11.1 does not quote srun's --output/--chdir paths: a path must stay one shell word as it is.
_SAFE_PATH = re.compile(r"^[A-Za-z0-9_./+@%:=,~-]+$")


def signal_spec(limit_s: int) -> str | None:
    """``TERM@60`` for time limits of 10 min or more, else ``None`` (see ``SIGNAL_MIN_LIMIT_S``)."""
    return f"{SIGNAL}@{SIGNAL_LEAD_S}" if limit_s >= SIGNAL_MIN_LIMIT_S else None


def check_path(path: str | os.PathLike[str], what: str) -> str:
    """Return ``path`` as text if it can appear unquoted in NeMo-Run's srun line.

    Raises:
        LaunchConfigError: whitespace or shell characters in it (NeMo-Run 0.11.1 leaves srun paths unquoted).
    """
    text = str(path)
    if not _SAFE_PATH.match(text):
        raise LaunchConfigError(
            f"{what} {text!r} has characters NeMo-Run would leave unquoted in the job script (spaces, quotes, $ ...); "
            "choose a path of letters, digits and ._-/"
        )
    return text


def gpus_per_node(cluster: ClusterConfig) -> int | None:
    """``cluster.gpus_per_node`` as an int (``None`` for a CPU-only profile).

    Raises:
        LaunchConfigError: ``auto`` (only the local executor detects GPUs) or a non-positive number.
    """
    value = cluster.gpus_per_node
    if value in (None, 0):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise LaunchConfigError(
            f"cluster.gpus_per_node={value!r}: a Slurm profile needs a number of GPUs per node (e.g. 8); "
            "'auto' is only for cluster=local"
        )
    return value


def make_tunnel(run: Any, cluster: ClusterConfig, home: Path | None) -> Any:
    """``run.LocalTunnel`` (job folder ``<home>/experiments``) or ``run.SSHTunnel`` from ``cluster.tunnel``
    (``home`` unused then).

    Raises:
        LaunchConfigError: SSH without host/user/job_dir/identity, a key file that does not exist, or a container-less
            job folder NeMo-Run would rewrite.
    """
    tunnel = cluster.tunnel
    if not cluster.remote:  # TunnelConfig allows local or ssh only
        return run.LocalTunnel(job_dir=os.path.join(str(home), "experiments"))
    host, user, job_dir, identity = tunnel.host, tunnel.user, tunnel.job_dir, tunnel.identity
    missing = [n for n, v in (("host", host), ("user", user), ("job_dir", job_dir), ("identity", identity)) if not v]
    if missing:
        raise LaunchConfigError(
            f"cluster.tunnel.kind=ssh needs {', '.join('cluster.tunnel.' + m for m in missing)} "
            "(identity: a private key file, for unattended use)"
        )
    key = Path(os.path.expanduser(str(identity)))
    if not key.is_file():
        raise LaunchConfigError(
            f"SSH key file {key} (cluster.tunnel.identity={identity!r}) does not exist; "
            "create it (ssh-keygen) or point cluster.tunnel.identity at your key"
        )
    if not cluster.container_image and RUNDIR_TOKEN in str(job_dir):
        raise LaunchConfigError(
            f"cluster.tunnel.job_dir={job_dir!r} contains '/nemo_run', which NeMo-Run 0.11.1 rewrites in "
            "container-less job scripts; choose another folder name"
        )
    ssh = run.SSHTunnel(host=str(host), user=str(user), job_dir=str(job_dir), identity=str(key),
                        port=int(tunnel.port) if tunnel.port else None)
    # Unattended: NeMo-Run would prompt for a password (then sys.exit(1)) when the key is refused.
    ssh.auth_handler = ssh.fallback_auth_handler = _no_prompt
    return ssh


def _no_prompt(*_args: Any) -> str:
    raise SchedulerError("the SSH key was refused and there is no one to type a password (unattended use)")


def pyxis_image(ref: str) -> str:
    """A container reference in the form pyxis/enroot expect: ``nvcr.io/nvidia/nemo:26.04`` -> ``nvcr.io#nvidia/nemo:26.04``.

    Pyxis reads ``[USER@][REGISTRY#]IMAGE[:TAG]|PATH`` (pyxis README); without ``#`` the registry is Docker Hub,
    so ``nvcr.io/nvidia/...`` would be fetched from registry-1.docker.io and fail (NVIDIA/pyxis issue 39).
    A first component with a dot or a port, or ``localhost``, is a registry host (Docker's reference grammar).
    Paths (``/...``, ``./...``) and references that already have ``#`` are returned unchanged.
    """
    if "#" in ref or ref.startswith(("/", "./", "../")) or "/" not in ref:
        return ref
    head, _, rest = ref.partition("/")
    user, at, host = head.rpartition("@")
    if "." in host or ":" in host or host == "localhost":
        return f"{user}{at}{host}#{rest}"
    return ref


def default_python(cluster: ClusterConfig) -> str:
    """The interpreter jobs use: ``python`` in a container or over SSH, else this process's interpreter.

    On a login node without a container the compute nodes share the filesystem, so the virtual environment
    that submits is the one that runs (sbatch exports PATH too, but tests do not activate the venv).
    """
    if cluster.container_image or cluster.remote:
        return "python"
    return sys.executable


def slurm_executor(
    run: Any,
    cluster: ClusterConfig,
    *,
    home: Path,
    env: JobEnv,
    packager: Any = None,
    time_limit_s: int | None = None,
    srun_args: Sequence[str] = (),
    nodes: int | None = None,
    gpus: int | None = None,
) -> Any:
    """A ``run.SlurmExecutor`` for the profile ``cluster``.

    ``run``: the imported nemo_run module; ``home``: the NEMORUN_HOME in use (launchers.home);
    ``env``: the job's environment, of which only ``env.plain`` is written (quoted) into the script;
    ``time_limit_s``: overrides ``cluster.time_limit`` (seconds); ``srun_args``: extra srun arguments, each
    kept one shell word; ``nodes``/``gpus``: override the profile (the container preflight uses 1 node).

    Raises:
        LaunchConfigError: a profile field the executor cannot use (names it and the fix).
    """
    if cluster.executor != "slurm":
        raise LaunchConfigError(f"cluster {cluster.name!r} has executor={cluster.executor!r}; "
                                "slurm_executor needs executor: slurm")
    if not cluster.account:
        raise LaunchConfigError(f"cluster {cluster.name!r}: cluster.account is required on Slurm "
                                "(sbatch --account); set it in the profile or with cluster.account=<name>")
    check_path(home, "NEMORUN_HOME")
    limit = time_limit_s or cluster.time_limit_s
    gpn = gpus_per_node(cluster) if gpus is None else gpus
    # no executor field for a reservation; an sbatch flag all the same
    extra: dict[str, Any] = {"reservation": str(cluster.reservation)} if cluster.reservation else {}
    image = cluster.container_image
    container_env = list(dict.fromkeys([*cluster.container_env, *env.plain, *env.secret_names]))
    executor = run.SlurmExecutor(
        account=str(cluster.account),
        partition=cluster.partition,
        qos=cluster.qos,
        constraint=cluster.constraint,
        exclude=cluster.exclude,
        nodes=int(nodes or cluster.nodes),
        ntasks_per_node=gpn or 1,
        gpus_per_node=gpn,
        exclusive=True if cluster.exclusive else None,
        time=format_time_limit(limit),
        signal=signal_spec(limit),
        additional_parameters=extra or None,
        container_image=pyxis_image(str(image)) if image else None,
        container_mounts=[str(m) for m in cluster.container_mounts] if image else [],
        # pyxis keeps the image's value of a variable unless it is named here; we name every one we set
        container_env=container_env if image and container_env else None,
        env_vars=quoted_env(env.plain),
        srun_args=quote_args(srun_args) or None,
        tunnel=make_tunnel(run, cluster, home),
        packager=packager if packager is not None else run.Packager(),
        job_name_prefix=JOB_NAME_PREFIX,
        poll_estimated_start_time=False,  # a background `squeue --start` thread per job: not needed
    )
    return executor
